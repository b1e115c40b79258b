"""Layers called from many threads at once give what they give alone
(ctypes drops the GIL in C calls; the library serialises per device and
per layer), and a layer closed while others run stays safe."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import qport
from conftest import acts, scheme, weights

N, K = 64, 128


def test_concurrent_forwards(devices):
    s = scheme("int8-dyn-sym")
    t = qport.quantize_weights(weights(N, K), s)
    layers = [qport.Linear(d, s, t) for d in devices if d.supports(s)]
    xs = [acts(1 + i % 4, K, seed=i) for i in range(24)]
    want = [layers[-1](x) for x in xs]  # the reference is last

    def job(i):
        lin = layers[i % len(layers)]
        return i, lin(xs[i % len(xs)])
    with ThreadPoolExecutor(max_workers=6) as ex:
        for i, y in ex.map(job, range(96)):
            assert (y == want[i % len(xs)]).all()


def test_concurrent_resolve():
    cfg = qport.load_config({"quant_method": "fp8", "activation_scheme": "dynamic"})
    with ThreadPoolExecutor(max_workers=4) as ex:
        names = list(ex.map(lambda i: cfg.resolve(f"model.layers.{i}.mlp.down_proj").method, range(200)))
    assert set(names) == {"Fp8LinearMethod"}


def test_close_while_running():
    s = scheme("fp8-dyn-token")
    lin = qport.Linear("cpu", s, qport.quantize_weights(weights(N, K), s))
    x = acts(64, K)
    stop = threading.Event()
    errors = []

    def worker():
        while not stop.is_set():
            try:
                lin(x)
            except ValueError as e:  # closed: the only acceptable failure
                assert "closed" in str(e)
                return
            except Exception as e:  # pragma: no cover
                errors.append(e)
                return
    ts = [threading.Thread(target=worker) for _ in range(4)]
    for th in ts:
        th.start()
    lin.close()
    stop.set()
    for th in ts:
        th.join()
    assert not errors
    with pytest.raises(ValueError):
        lin(x)
