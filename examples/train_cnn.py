"""Training a small ResNet-style CNN with the whole training step compiled.

The model: a 3x3 stem, three residual blocks (two 3x3 convolutions with BatchNorm2d and ReLU
each, `out += shortcut`, a 1x1 convolution on the shortcut where the shape changes), global
average pooling and a linear classifier, on random 3x32x32 images with 10 labels. SGD with
momentum and weight decay. The step (zero_grad, forward, loss, backward, update) is compiled
with dt.jit(..., fullgraph=True): one graph, batch norm's running statistics updated in place.
The script checks that the compiled run gives the same losses and final weights as the same
steps run eagerly, and that the loss falls.

    dyntrace --stats examples/train_cnn.py [steps]

bench/cnn_training.py times the same model against PyTorch; tests/python/test_nn_layers.py
trains a narrower one (widths=(8, 16)) the same way.
"""
import sys

import dyntrace as dt


def make_model(ns, widths=(16, 32, 64), classes=10):
    """The CNN in `ns`'s nn (dyntrace.nn or torch.nn): the same layers in either. The first
    block keeps the stem's width; each later one moves to the next width with stride 2."""
    nn, F = ns.nn, ns.nn.functional

    class Block(nn.Module):
        def __init__(self, cin, cout, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += self.shortcut(x)
            return F.relu(out)

    blocks = [Block(widths[0], widths[0])] + [Block(a, b, 2) for a, b in zip(widths, widths[1:])]
    return nn.Sequential(nn.Conv2d(3, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU(),
                         *blocks, nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(widths[-1], classes))


def make_step(ns, model, lr=0.05):
    """One training step of `model`: returns the loss as a tensor (its .item() inside a compiled
    step would end the graph there)."""
    opt = ns.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    criterion = ns.nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def train(compiled, steps, widths=(16, 32, 64), batch=16, size=32):
    """Losses and final state_dict of `steps` steps from fixed weights and data."""
    dt.manual_seed(0)
    batches = [(dt.randn(batch, 3, size, size), dt.randint(0, 10, (batch,))) for _ in range(3)]
    dt.manual_seed(1)
    model = make_model(dt, widths)
    step = make_step(dt, model)
    if compiled:
        step = dt.jit(step, backend="cpu", fullgraph=True)
    losses = [step(*batches[i % len(batches)]).item() for i in range(steps)]
    return losses, model.state_dict()


def main(steps=6):
    compiled, compiled_state = train(True, steps)
    eager, eager_state = train(False, steps)
    for i, (a, b) in enumerate(zip(compiled, eager)):
        print(f"step {i}: loss {a:.4f} (eager {b:.4f})")
    # The cpu backend rounds as eager does: the same losses, weights and running statistics.
    assert compiled == eager, (compiled, eager)
    assert all(compiled_state[k].tolist() == v.tolist() for k, v in eager_state.items())
    assert compiled[-1] < compiled[0], compiled
    print("train_cnn OK")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
