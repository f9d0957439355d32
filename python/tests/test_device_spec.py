"""vdev.DeviceSpec, as TensorFlow's tf.DeviceSpec (version 2): the parts,
to_string, from_string's forms and errors (TensorFlow's words), replace,
make_merged_spec, equality and hashing; and vdev.device taking a spec."""
import pytest

import vdev

DS = vdev.DeviceSpec
LONG = "/job:localhost/replica:0/task:0"


def test_parts_and_string():
    s = DS(job="ps", device_type="GPU", device_index=0)
    assert (s.job, s.replica, s.task, s.device_type, s.device_index) == ("ps", None, None,
                                                                         "GPU", 0)
    assert s.to_string() == "/job:ps/device:GPU:0"
    assert DS(job="w", replica=1, task=2, device_type="gpu", device_index=3).to_string() == \
        "/job:w/replica:1/task:2/device:GPU:3"
    assert DS(device_type="cpu").to_string() == "/device:CPU:*"  # no index: '*'
    assert DS().to_string() == ""
    assert DS(replica="1").replica == 1  # ints taken as TensorFlow takes them
    with pytest.raises(AttributeError):
        s.job = "x"  # immutable


@pytest.mark.parametrize("name,parts", [
    ("/job:localhost/replica:0/task:0/device:GPU:1", ("localhost", 0, 0, "GPU", 1)),
    ("/device:GPU:1", (None, None, None, "GPU", 1)),
    ("/gpu:1", (None, None, None, "GPU", 1)),
    ("GPU:1", (None, None, None, "GPU", 1)),
    ("cpu", (None, None, None, "CPU", None)),
    ("/device:CPU:*", (None, None, None, "CPU", None)),
    ("/job:worker/task:3", ("worker", None, 3, None, None)),
    ("", (None, None, None, None, None)),
])
def test_from_string(name, parts):
    s = DS.from_string(name)
    assert (s.job, s.replica, s.task, s.device_type, s.device_index) == parts


def test_from_string_errors():
    with pytest.raises(ValueError) as e:
        DS.from_string("/gpu:0/cpu:0")
    assert str(e.value) == ("Multiple device types are not allowed while parsing the device "
                            "spec: /gpu:0/cpu:0.")
    with pytest.raises(ValueError) as e:
        DS.from_string("/hpu:0")
    assert str(e.value) == ("Unknown attribute 'hpu' is encountered while parsing the device "
                            "spec: '/hpu:0'.")
    with pytest.raises(ValueError):
        DS.from_string("/device:GPU:x")


def test_replace_merge_eq_hash():
    a = DS(job="train", device_type="CPU", device_index=0)
    b = DS(device_type="GPU", device_index=1)
    m = a.make_merged_spec(b)
    assert m.to_string() == "/job:train/device:GPU:1"
    assert a.make_merged_spec(DS(job="ps")).to_string() == "/job:ps/device:CPU:0"
    # part by part: the type changes, the index stays
    assert a.make_merged_spec(DS(device_type="GPU")).to_string() == "/job:train/device:GPU:0"
    r = a.replace(device_index=2)
    assert r.to_string() == "/job:train/device:CPU:2" and a.device_index == 0
    with pytest.raises(TypeError):
        a.replace(color="red")
    assert DS.from_string("/gpu:1") == DS(device_type="GPU", device_index=1)
    assert len({DS.from_string("GPU:1"), DS.from_string("/device:GPU:1")}) == 1
    assert DS(device_type="GPU") != DS(device_type="GPU", device_index=0)


def test_device_takes_a_spec():
    with vdev.device(DS(device_type="GPU", device_index=2)):
        t = vdev.constant([1.0])
    assert t.device == LONG + "/device:GPU:2"
    with vdev.device("GPU:1"):
        with vdev.device(DS(job="localhost")):  # merged: the device stays
            u = vdev.constant([1.0])
        with vdev.device(DS()):  # empty: keeps the scope
            w = vdev.constant([1.0])
    assert u.device == w.device == LONG + "/device:GPU:1"
    with pytest.raises(RuntimeError) as e:
        with vdev.device(DS(device_type="GPU", device_index=7)):
            pass
    assert "unknown device" in str(e.value)


@pytest.mark.parametrize("name", ["/gpu:01", "/GPU:1 ", "GPU: 1", "gpu:+1", "/device:GPU:01",
                                  "/job:localhost/replica:00/task:0/device:GPU:1"])
def test_device_reads_an_index_as_tensorflow(name):
    """TensorFlow's DeviceSpec reads an index with int(): a leading zero, a
    sign or blanks around the digits still name GPU:1 (vdev's C names take
    leading zeros, as TensorFlow's C++ parser does, and refuse the rest)."""
    assert DS.from_string(name).device_index == 1
    with vdev.device(name):
        t = vdev.constant([1.0])
    assert t.device == LONG + "/device:GPU:1"
    with pytest.raises(ValueError) as e:
        with vdev.device("GPU:1x"):
            pass
    assert str(e.value) == ("Bad device index '1x' in the device spec: 'GPU:1x' (expected a "
                            "whole number such as 0 or 1)")
