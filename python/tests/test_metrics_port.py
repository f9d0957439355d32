"""vdev.placement.metrics_port(): the port VDEV_METRICS_ADDR's endpoint got,
the free one the system picked for port 0 included (scraped to show it is
the endpoint's), 0 without an endpoint; it starts vdev, as the variable is
read at start-up; metrics_serve(addr) and metrics_stop() from code."""
import urllib.request

import pytest

import vdev


def test_port_zero_gives_the_port_picked(monkeypatch):
    monkeypatch.setenv("VDEV_METRICS_ADDR", "127.0.0.1:0")
    assert not vdev.is_initialized()
    port = vdev.placement.metrics_port()
    assert vdev.is_initialized()
    assert 0 < port < 65536
    assert vdev.placement.metrics_port() == port
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
        body = r.read().decode()
    assert 'vdev_memory_in_use_bytes{device="/device:GPU:0",physical="0",backend="sim"}' in body
    vdev.shutdown()
    monkeypatch.delenv("VDEV_METRICS_ADDR")
    assert vdev.placement.metrics_port() == 0


def test_no_endpoint_is_port_zero():
    assert vdev.placement.metrics_port() == 0
    assert vdev.is_initialized()


def test_exported_and_documented():
    assert "metrics_port" in vdev.placement.__all__
    assert "VDEV_METRICS_ADDR=127.0.0.1:0" in vdev.placement.metrics_port.__doc__


def _scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
        return r.read().decode()


def test_serve_and_stop_from_code():
    port = vdev.placement.metrics_serve("127.0.0.1:0")
    assert vdev.is_initialized()
    assert 0 < port < 65536 and vdev.placement.metrics_port() == port
    assert "vdev_memory_in_use_bytes{" in _scrape(port)
    # one endpoint at a time, in this module's words
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.placement.metrics_serve("127.0.0.1:0")
    assert str(e.value) == ("vdev_metrics_serve: a metrics endpoint is already serving on "
                            "127.0.0.1:0 (port %d); call vdev.placement.metrics_stop() first"
                            % port)
    vdev.placement.metrics_stop()
    assert vdev.placement.metrics_port() == 0
    with pytest.raises(OSError):
        _scrape(port)
    vdev.placement.metrics_stop()  # nothing serves: nothing happens
    # served again after a stop, and stopped by shutdown
    port = vdev.placement.metrics_serve("127.0.0.1:0")
    assert "vdev_memory_in_use_bytes{" in _scrape(port)
    vdev.shutdown()
    with pytest.raises(OSError):
        _scrape(port)


def test_serve_refuses_bad_addresses():
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.placement.metrics_serve("127.0.0.1:99999")
    assert str(e.value) == ('vdev_metrics_serve="127.0.0.1:99999": port 99999 is out of range '
                            '(0-65535)')
    assert vdev.placement.metrics_port() == 0
    with pytest.raises(TypeError) as e:
        vdev.placement.metrics_serve(9400)
    assert str(e.value) == ("metrics_serve: addr must be a string such as '127.0.0.1:9400', "
                            "not int")
    # C would serve on the address before the null character
    with pytest.raises(ValueError) as e:
        vdev.placement.metrics_serve("127.0.0.1:0\0junk")
    assert str(e.value) == ("metrics_serve: embedded null character in addr "
                            "'127.0.0.1:0\\x00junk'")
    assert vdev.placement.metrics_port() == 0
    for name in ("metrics_serve", "metrics_stop"):
        assert name in vdev.placement.__all__
