#!/usr/bin/env python3
"""Submit N one-GPU `true` jobs from 8 REST clients (keep-alive) and time first submit -> all succeeded.

The measurement behind docs/performance.md, "Starts and ends travel at once": against a running
`tessera up` (or any server with agents), e.g.

    build/bin/tessera up --data /tmp/sj --listen 127.0.0.1:18420 --gpus fake:8xH100-80GB-SXM --node n1 &
    tools/short_jobs.py --server http://127.0.0.1:18420 --token-file /tmp/sj/admin.token --jobs 300

With --cli BIN each submission is a `BIN submit` process (as users and bench/slurm-compare.sh submit);
with --hold the jobs are submitted held and only the submissions are timed.

Standard library only. Exits 1 if a submit is refused or a job ends other than succeeded.
"""
import argparse, http.client, json, subprocess, sys, threading, time, urllib.parse

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--server", default="http://127.0.0.1:8420")
ap.add_argument("--token-file", required=True)
ap.add_argument("--jobs", type=int, default=300)
ap.add_argument("--clients", type=int, default=8)
ap.add_argument("--queue", default="default")
ap.add_argument("--timeout", type=float, default=600)
ap.add_argument("--cli", help="submit with this tessera binary's `submit` command, one process per job")
ap.add_argument("--hold", action="store_true", help="submit held; time the submissions only")
a = ap.parse_args()
url = urllib.parse.urlparse(a.server)
headers = {"Authorization": "Bearer " + open(a.token_file).read().strip(), "Content-Type": "application/json"}
ids, lock, failures = [], threading.Lock(), []

def connect():
    return http.client.HTTPConnection(url.hostname, url.port or 80, timeout=60)

def cli_submitter(k):
    for i in range(k, a.jobs, a.clients):
        cmd = [a.cli, "submit", "--server", a.server, "--token-file", a.token_file, "--json", "--gpus", "1",
               "-J", "short-%d" % i, "-p", a.queue] + (["-H"] if a.hold else []) + ["--", "true"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(r.stderr.strip() or r.stdout.strip())
            return
        with lock:
            ids.append(json.loads(r.stdout)["id"])

def submitter(k):
    if a.cli:
        return cli_submitter(k)
    c = connect()
    for i in range(k, a.jobs, a.clients):
        body = {"name": "short-%d" % i, "queue": a.queue, "resources": {"gpus": 1}, "command": ["true"]}
        if a.hold:
            body["hold"] = True
        c.request("POST", "/api/v1/jobs", json.dumps(body), headers)
        r = c.getresponse()
        answer = json.loads(r.read())
        if r.status != 201:
            failures.append(answer)
            return
        with lock:
            ids.append(answer["id"])

t0 = time.time()
threads = [threading.Thread(target=submitter, args=(k,)) for k in range(a.clients)]
for t in threads: t.start()
for t in threads: t.join()
t1 = time.time()
if failures:
    sys.exit("submit refused: %s" % failures[0])
if a.hold:
    print("%d jobs: submitted held in %.2f s (%d clients%s)" % (a.jobs, t1 - t0, a.clients, ", one CLI process each" if a.cli else ""))
    sys.exit(0)
lo, c, wanted = min(ids), connect(), set(ids)
while True:
    ended, bad, after = 0, [], lo - 1
    while True:  # every job from the first id on, in pages
        c.request("GET", "/api/v1/jobs?limit=1000&after=%d" % after, headers=headers)
        page = json.loads(c.getresponse().read())
        for j in page["jobs"]:
            if j["id"] not in wanted: continue
            if j["state"] == "succeeded": ended += 1
            elif j["state"] in ("failed", "cancelled", "timeout"): bad.append(j)
        if page.get("next_after") is None: break
        after = page["next_after"]
    if bad:
        sys.exit("job %d ended %s: %s" % (bad[0]["id"], bad[0]["state"], bad[0].get("reason")))
    if ended >= len(wanted): break
    if time.time() - t0 > a.timeout:
        sys.exit("timed out with %d of %d succeeded" % (ended, len(wanted)))
    time.sleep(0.05)
t2 = time.time()
print("%d jobs: submitted in %.2f s (%d clients%s); all succeeded %.2f s after the first submit" % (a.jobs, t1 - t0, a.clients, ", one CLI process each" if a.cli else "", t2 - t0))
