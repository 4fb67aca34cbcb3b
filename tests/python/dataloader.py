# SPDX-License-Identifier: MIT
"""A torch DataLoader whose two forked workers each keep one bytearray per
item they load, for test-known.py: item i asks malloc for 1,000,000 * (i + 1)
+ 1 bytes at the line marked below, in the worker that loads it; the
workers end as multiprocessing ends them (os._exit), so each keeps its
blocks to the end."""
import torch
from torch.utils.data import DataLoader, Dataset

kept = []


class Items(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        kept.append(bytearray(1_000_000 * (i + 1)))  # SITE getitem
        return torch.tensor([i])


if __name__ == "__main__":
    loader = DataLoader(Items(), batch_size=1, num_workers=2,
                        multiprocessing_context="fork")
    print(sorted(int(b) for b in loader))
