"""plot_many_devices.py N FILE — writes a trace (Chrome trace event format, as
vdev writes them) of N device tracks, /device:CPU:0 then /device:GPU:0 and
on, each with one memory counter and one op, for the `vdev plot` tests of
many devices (cli_plot.sh, cli_plot_legend.sh)."""
import sys

n, ev = int(sys.argv[1]), ['{"name":"process_name","ph":"M","pid":1,"args":{"name":"vdev"}}']
for t in range(n):
    d = "/device:CPU:0" if t == 0 else "/device:GPU:%d" % (t - 1)
    ev.append('{"name":"thread_name","ph":"M","pid":1,"tid":%d,'
              '"args":{"name":"%s (sim)"}}' % (t, d))
    ev.append('{"name":"memory %s","ph":"C","ts":%d,"pid":1,"tid":%d,"args":{"in_use":%d,'
              '"reserved":2097152}}' % (d, t + 1, t, 256 * (t + 1)))
    ev.append('{"name":"MatMul","cat":"op","ph":"X","ts":%d,"dur":1,"pid":1,"tid":%d,'
              '"args":{"op_type":0}}' % (t + 1, t))
with open(sys.argv[2], "w") as f:
    f.write("[\n" + ",\n".join(ev) + "\n]\n")
