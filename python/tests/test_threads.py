"""Python threads, as a user runs one model per thread: device scopes,
tapes and strategy scopes belong to the thread that entered them (as
TensorFlow's thread-local context), and a tape whose block a thread never
left (entered by hand, the task then failing) and that is collected on
another thread is dropped by its own thread at its next op: a thread pool's
thread records no more and may begin a new tape, and gives back the memory
the tape held."""
import concurrent.futures
import gc
import threading

import numpy as np

import vdev
import vdev.distribute


def test_scopes_are_per_thread():
    entered, done = threading.Event(), threading.Event()
    seen = {}

    def scoped():
        with vdev.device("GPU:1"):
            entered.set()
            done.wait()
            seen["a"] = vdev.constant([1.0]).device

    def plain():
        entered.wait()
        seen["b"] = vdev.constant([1.0]).device
        done.set()

    threads = [threading.Thread(target=scoped), threading.Thread(target=plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": "/job:localhost/replica:0/task:0/device:GPU:1",
                    "b": "/job:localhost/replica:0/task:0/device:GPU:0"}
    # a thread started inside a scope (a device's or a strategy's) starts with none
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with vdev.device("GPU:2"), strategy.scope():
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            child = pool.submit(lambda: (vdev.constant([1.0]).device,
                                         vdev.distribute.has_strategy(),
                                         type(vdev.Variable([1.0])).__name__)).result()
    assert child == ("/job:localhost/replica:0/task:0/device:GPU:0", False, "Variable")


def test_tapes_in_threads_each_correct():
    out = {}

    def train(i):
        with vdev.device("GPU:%d" % i):
            w = vdev.Variable(np.full((4, 4), 0.1 * (i + 1), np.float32))
            x = vdev.constant(np.arange(8, dtype=np.float32).reshape(2, 4) + i)
            for _ in range(20):
                with vdev.GradientTape() as tape:
                    y = vdev.tanh(vdev.matmul(x, w))
                    loss = vdev.reduce_sum(vdev.square(y))
                g = tape.gradient(loss, w)
            yn = np.tanh(x.numpy() @ w.numpy())
            out[i] = np.abs(g.numpy() - x.numpy().T @ (2 * yn * (1 - yn ** 2))).max()

    threads = [threading.Thread(target=train, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out) == [0, 1, 2] and max(out.values()) < 1e-5


def test_abandoned_tape_collected_on_another_thread():
    pool = concurrent.futures.ThreadPoolExecutor(1)
    w = vdev.Variable(np.ones((64, 64), np.float32))
    held = {}

    def leave_tape_open():
        held["tape"] = tape = vdev.GradientTape()
        tape.__enter__()

    def step():
        for _ in range(10):
            vdev.matmul(w, w)
        with vdev.GradientTape() as tape:
            loss = vdev.reduce_sum(w * w)
        g = tape.gradient(loss, w).numpy()[0, 0]
        del tape, loss
        return g, vdev.config.experimental.get_memory_info("GPU:0")["current"]

    pool.submit(leave_tape_open).result()
    del held["tape"]
    gc.collect()  # on this thread, not the pool's, whose tape still records
    assert pool.submit(step).result() == (2.0, 64 * 64 * 4)  # w alone: nothing recorded
    pool.shutdown()
