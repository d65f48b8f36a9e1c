"""The DDP experiment's models and data: scikit-learn's digits as 1x8x8 float32 images
(shipped with scikit-learn, no download), the training MLP of digits_mlp rewritten with
torch.nn, a small CNN, and a user's own model by `package.module:factory`: a callable
returning an nn.Module from (N, 1, 8, 8) float32 images to (N, 10) logits."""

import importlib

import torch
from sklearn.datasets import load_digits
from torch import nn

TEST_FRACTION = 0.2


def mlp(hidden=512):
    """64-512-512-10, ReLU: digits_mlp's network (301,066 parameters, 1.2 MB)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def cnn():
    """Two 3x3 convolutions (16 and 32 channels), a 2x2 pool, 256 hidden, 10 out
    (138,698 parameters, 0.55 MB)."""
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, 10))


BUILT_IN = {"mlp": mlp, "cnn": cnn}


def model_factory(spec):
    """The factory a --models item names: mlp, cnn, or package.module:factory."""
    if spec in BUILT_IN:
        return BUILT_IN[spec]
    module_name, _, name = spec.partition(":")
    if not name:
        raise ValueError("a model is mlp, cnn or package.module:factory, not %r" % spec)
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise ValueError("cannot load model factory %s: %s" % (spec, error)) from None


def model_name(spec):
    """A model's short name in the CSV: mlp, cnn, or the factory's name."""
    return spec.rpartition(":")[2]


def digits(seed):
    """(x_train, y_train, x_test, y_test): images scaled to [0, 1], split by `seed`."""
    data = load_digits()
    order = torch.randperm(len(data.target), generator=torch.Generator().manual_seed(seed))
    x = torch.tensor(data.images / 16.0, dtype=torch.float32)[order].unsqueeze(1)
    y = torch.tensor(data.target)[order]
    test = int(len(y) * TEST_FRACTION)
    return x[test:], y[test:], x[:test], y[:test]


def gradient_floats(spec):
    """Parameters of the model `spec` names (its gradient's float32 values)."""
    return sum(p.numel() for p in model_factory(spec)().parameters() if p.requires_grad)
