#!/usr/bin/python3
"""QMP for tests/guests (standard library only).

  qmp.py SOCK CMD [JSON-ARGS]       one command; prints the reply's "return" as JSON, exit 1 on error
  qmp.py SOCK --events FILE         until QEMU goes away: every event as one JSON line to FILE
                                    (QEMU's own timestamp plus "host_ts", the host's clock)
  qmp.py SOCK --migrate URI [--max-bandwidth BYTES] [--mark FILE]
                                    migrate, poll query-migrate every 50 ms until it ends; with
                                    --mark, FILE gets "active <ts>" once RAM transfer runs and
                                    "device <ts>" / "completed <ts>" as the status passes them;
                                    prints status= total_ms= downtime_ms= setup_ms= wall_s=
A QMP socket serves one client at a time: the event logger needs a socket of its own.
"""
import json
import socket
import sys
import time


class QMP:
    def __init__(self, path, timeout=30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        deadline = time.time() + timeout
        while True:
            try:
                self.sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        self.rfile = self.sock.makefile('rb')
        self.events = []
        self._read()  # greeting
        self.cmd('qmp_capabilities')

    def _read(self):
        line = self.rfile.readline()
        if not line:
            raise EOFError('QMP closed')
        return json.loads(line)

    def cmd(self, name, args=None):
        msg = {'execute': name}
        if args:
            msg['arguments'] = args
        self.sock.sendall((json.dumps(msg) + '\n').encode())
        while True:
            r = self._read()
            if 'event' in r:
                r['host_ts'] = time.time()
                self.events.append(r)
                continue
            return r


def main():
    path, what = sys.argv[1], sys.argv[2]
    if what == '--events':
        q = QMP(path)
        q.sock.settimeout(None)
        with open(sys.argv[3], 'a') as out:
            while True:
                try:
                    e = q._read()
                except (EOFError, OSError, ValueError):
                    return 0
                e['host_ts'] = time.time()
                out.write(json.dumps(e) + '\n')
                out.flush()
    if what == '--migrate':
        uri = sys.argv[3]
        opts = sys.argv[4:]
        mark = None
        q = QMP(path)
        if '--max-bandwidth' in opts:
            bw = int(opts[opts.index('--max-bandwidth') + 1])
            q.cmd('migrate-set-parameters', {'max-bandwidth': bw})
        if '--mark' in opts:
            mark = open(opts[opts.index('--mark') + 1], 'a')
        q.cmd('migrate-set-capabilities',
              {'capabilities': [{'capability': 'events', 'state': True}]})
        t0 = time.time()
        r = q.cmd('migrate', {'uri': uri})
        if 'error' in r:
            print('status=failed error=%s' % json.dumps(r['error']))
            return 1
        seen = set()
        while True:
            info = q.cmd('query-migrate')['return']
            st = info.get('status', 'none')
            if mark and st not in seen:
                mark.write('%s %.6f\n' % (st, time.time()))
                mark.flush()
            seen.add(st)
            if st in ('completed', 'failed', 'cancelled'):
                break
            time.sleep(0.05)
        print('status=%s total_ms=%s downtime_ms=%s setup_ms=%s wall_s=%.2f transferred=%s' % (
            st, info.get('total-time', 'na'), info.get('downtime', 'na'),
            info.get('setup-time', 'na'), time.time() - t0,
            info.get('ram', {}).get('transferred', 'na')))
        return 0 if st == 'completed' else 1
    args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    q = QMP(path)
    r = q.cmd(what, args)
    if 'error' in r:
        print(json.dumps(r['error']))
        return 1
    print(json.dumps(r.get('return')))
    return 0


if __name__ == '__main__':
    sys.exit(main())
