# SPDX-License-Identifier: MIT
"""A PyTorch (CPU) training loop with the commonest memory leak of all: each
step also scores a held-out batch for the log, outside torch.no_grad(), and
keeps that loss tensor in a list to average at the end. A loss that still
requires grad carries its autograd graph, and the graph holds every
activation saved for a backward pass that never comes: here the ReLU's
output, VAL_BATCH x HIDDEN elements per step (4 MiB in float64, 2 MiB in
float32), plus the small prediction and the loss itself.

    torch-keeps-graph.py [--steps N] [--dtype float64|float32] [--keep-every K]

With --keep-every K only every K-th step keeps its graph (the others keep the
loss detached): a slower leak, for a long run that must not fill the machine.

Each step is named in the trace with memtrace_mark through ctypes (nothing
happens when the program is not traced). At the end the program prints what
the kept graphs hold per step, counted from the graph itself (the storages
of the tensors saved in it, less the parameters and the data), so that a
test can hold memtrace's figure against the truth. The fix: `with
torch.no_grad():` around the scoring, or keep `loss.item()`."""
import argparse
import ctypes

import torch

IN, HIDDEN, BATCH, VAL_BATCH = 64, 1024, 128, 512

try:
    mark = ctypes.CDLL(None).memtrace_mark
    mark.argtypes = [ctypes.c_char_p]
except AttributeError:  # not traced
    mark = None


def saved_storages(loss, known):
    """{storage address: bytes} of the tensors saved in loss's graph, less
    those in known (parameters and data, which do not grow per step)."""
    found, seen, todo = {}, set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            if name.startswith("_saved_"):
                t = getattr(node, name)
                if isinstance(t, torch.Tensor):
                    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
                    if s.data_ptr() not in known:
                        found[s.data_ptr()] = s.nbytes()
        todo.extend(n for n, _ in node.next_functions)
    found.setdefault(loss.data_ptr(), loss.element_size())
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--keep-every", type=int, default=1)
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)

    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(BATCH, IN, dtype=dtype)
    y = x[:, :4].sum(dim=1, keepdim=True).tanh()
    val_x = torch.randn(VAL_BATCH, IN, dtype=dtype)
    val_y = val_x[:, :4].sum(dim=1, keepdim=True).tanh()
    model = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, 1)).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    known = {p.data_ptr() for p in model.parameters()} | {t.data_ptr() for t in (x, y, val_x, val_y)}

    val_losses, last_kept = [], None
    for step in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()  # frees this graph's saved tensors
        opt.step()
        val_loss = torch.nn.functional.mse_loss(model(val_x), val_y)  # the bug: no torch.no_grad()
        if step % args.keep_every == args.keep_every - 1:
            val_losses.append(val_loss)  # the bug: the tensor, not val_loss.item()
            last_kept = val_loss
        else:
            val_losses.append(val_loss.detach())
        if mark:
            mark(f"step {step}".encode())

    per_step = saved_storages(last_kept, known)
    print(f"dtype {args.dtype} steps {args.steps} val loss {torch.stack(val_losses).mean().item():.6f}")
    print(f"kept per step {sum(per_step.values())} bytes, largest {max(per_step.values())} bytes")


if __name__ == "__main__":
    main()
