# SPDX-License-Identifier: MIT
"""A correct PyTorch (CPU) training loop: no memory kept from one step to
the next, so no growth. A small MLP on random data, each step marked in the
trace through memtrace_mark (ctypes; nothing happens untraced).

    torch-train.py [--steps N] [--dtype float32|float64] [--optim sgd|adam] [--hidden N] [--no-marks]

With Adam, the optimizer's state (two buffers the size of the parameters)
is allocated once, at the first step, and lives to the end: memory that
rises once and then stays, which is not growth either. Prints the bytes of
the parameters, so that a test knows the size of that state."""
import argparse
import ctypes

import torch

IN, OUT, BATCH = 256, 10, 64

try:
    mark = ctypes.CDLL(None).memtrace_mark
    mark.argtypes = [ctypes.c_char_p]
except AttributeError:  # not traced
    mark = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--optim", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--hidden", type=int, default=2048, help="the width of the two hidden layers")
    ap.add_argument("--no-marks", action="store_true", help="do not mark the steps")
    args = ap.parse_args()
    step_mark = None if args.no_marks else mark
    dtype = getattr(torch, args.dtype)

    torch.manual_seed(0)
    hidden = args.hidden
    model = torch.nn.Sequential(torch.nn.Linear(IN, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, OUT)).to(dtype)
    if args.optim == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.0)
    loss_fn = torch.nn.CrossEntropyLoss()
    total = 0.0
    for step in range(args.steps):
        if step_mark:
            step_mark(f"step {step}".encode())
        x = torch.randn(BATCH, IN, dtype=dtype)
        y = torch.randint(0, OUT, (BATCH,))
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        total += loss.item()
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    print(f"parameters {params} bytes, mean loss {total / args.steps:.4f}")


main()
