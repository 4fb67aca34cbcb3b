# SPDX-License-Identifier: MIT
# A small torch training loop (Debian's python3-torch, CPU): fits a 2-layer
# MLP to a fixed synthetic regression, prints the loss every 20 steps.
# Deterministic: the same output with and without the preload.
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
x = torch.randn(256, 16)
y = (x[:, :4].sum(dim=1, keepdim=True) * 0.5).tanh()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(100):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    if step % 20 == 0 or step == 99:
        print(f"step {step} loss {loss.item():.6f}")
