"""The README's Keras example (the ```python block after "**Keras.**" in its
Python section) runs as written: a functional model with a merge layer,
compile, fit with validation and EarlyStopping, evaluate and save_weights,
so the first Keras program a reader copies works."""
import contextlib
import io
import os
import re

import vdev

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _keras_block():
    readme = open(os.path.join(SRC, "README.md")).read()
    section = readme.split("\n**Keras.**", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_keras_example_runs(tmp_path, monkeypatch):
    code = _keras_block()
    assert "model.fit(" in code and "vdev.Input(" in code
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    scope = {"__name__": "__readme__"}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md (Keras example)", "exec"), scope)
    m = re.fullmatch(r"(\d+) epochs, accuracy (\d\.\d\d)\n", out.getvalue())
    assert m, out.getvalue()
    assert 1 <= int(m.group(1)) <= 20
    assert float(m.group(2)) > 0.6  # it learnt something
    # save_weights wrote what load_weights reads back into the same model
    model = scope["model"]
    saved = [w.numpy().copy() for w in model.weights]
    for w in model.weights:
        w.assign(vdev.zeros(w.shape))
    model.load_weights(str(tmp_path / "weights.safetensors"))
    for w, s in zip(model.weights, saved):
        assert (w.numpy() == s).all()
