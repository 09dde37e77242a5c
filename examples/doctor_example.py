"""A script with one graph break and one recompile storm, for ``graphlift doctor``.

    python -m graphlift doctor examples/doctor_example.py

``make demo`` ends with this run: the doctor finds the print in ``normalize`` (fix it first), then
the ``passes`` argument of ``smooth``, a new int on every call that a Python loop bakes into each
graph (recompiles until the limit).
"""

import torch

import graphlift


@graphlift.compile
def normalize(x):
    x = x - x.mean()
    print(f"normalize: {x.shape[0]} values")  # a graph break: a graph cannot print
    return x / x.std()


@graphlift.compile
def smooth(x, passes):
    for _ in range(passes):  # a Python loop over an int: each value of passes is its own graph
        x = 0.5 * (x + x.flip(0))
    return x


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(64)
    for _ in range(3):
        x = normalize(x)
    for passes in range(1, 13):
        x = smooth(x, passes)
    print(f"done: x.norm() = {x.norm().item():.3f}")


if __name__ == "__main__":
    main()
