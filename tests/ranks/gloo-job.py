# SPDX-License-Identifier: MIT
"""One rank of a 4-process torch.distributed job on the CPU (gloo), as
a launcher starts it (RANK, WORLD_SIZE; the ranks meet through the file
GLOO_INIT_FILE, no port needed): each rank
holds (rank + 1) x 32 MiB in one tensor from one line until it ends, the
ranks all-reduce, rank 2 then fails to allocate 1 PiB, and after a barrier
every rank ends normally but rank 3, which kills itself with SIGKILL."""
import os
import signal
import time

import torch
import torch.distributed as dist

MiB = 1 << 20


def hold(rank):
    return torch.ones((rank + 1) * 32 * MiB, dtype=torch.uint8)


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="file://" + os.environ["GLOO_INIT_FILE"],
                            rank=rank, world_size=world)
    held = hold(rank)
    total = torch.tensor([float(held.numel() // MiB)])
    dist.all_reduce(total)
    assert total.item() == 32 * sum(range(1, world + 1)), total.item()
    if rank == 2:
        try:
            torch.empty(1 << 50, dtype=torch.uint8)
        except RuntimeError:
            pass
    dist.barrier()
    if rank == 3:
        time.sleep(0.2)  # after the failure, and after the others are past the barrier
        os.kill(os.getpid(), signal.SIGKILL)
    dist.destroy_process_group()


main()
