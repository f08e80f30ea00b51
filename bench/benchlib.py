"""Shared by the bench scripts' Python parts (run from the repository's root: `sys.path` gets
`bench`): one HTTP call, provisioning devices in batches, uploading a pack, a percentile."""
import json
import time
import urllib.error
import urllib.request
import uuid


def call(url, method, path, token, body=None, raw=None, ctype="application/json"):
    """(status, body bytes) of one request; an HTTP error status is returned, not raised."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url + path, method=method, data=data,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": ctype})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def provision(url, admin, n, device):
    """Provisions devices `device(0) … device(n - 1)` (each a JSON object with at least `id`), a
    thousand a request; prints how long it took and returns {id: token}."""
    tokens = {}
    t0 = time.perf_counter()
    for start in range(0, n, 1000):
        batch = [device(i) for i in range(start, min(n, start + 1000))]
        status, body = call(url, "POST", "/api/v1/devices", admin, {"devices": batch})
        assert status == 201, (status, body)
        for d in json.loads(body):
            tokens[d["id"]] = d["token"]
    print(f"provisioned {n} devices in {time.perf_counter() - t0:.1f} s")
    return tokens


def upload(url, admin, pack, model="kws", version="1.0.0"):
    """Creates `model` and uploads the Vela output `pack` as its `version`."""
    assert call(url, "POST", "/api/v1/models", admin, {"name": model})[0] == 201
    boundary = uuid.uuid4().hex
    with open(pack, "rb") as f:
        payload = f.read()
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"pack\"; filename=\"p.tflite\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + payload \
        + f"\r\n--{boundary}--\r\n".encode()
    status, body = call(url, "POST", f"/api/v1/models/{model}/versions/{version}", admin, raw=form,
                        ctype=f"multipart/form-data; boundary={boundary}")
    assert status == 201, (status, body)


def rollout(url, admin, tokens, n, group, policy, reporters):
    """Deploys kws 1.0.0 to `group` (`g<k>` of devices `dev-<i>` provisioned with group
    `g{i % 10}`) with `policy` (None: one batch), then has the first `reporters` of its devices
    that are offered it report `downloading` and `installed`. Returns {state: [ms per report]}."""
    body = {"model": "kws", "version": "1.0.0", "group": group}
    if policy:
        body["rollout"] = policy
    status, made = call(url, "POST", "/api/v1/deployments", admin, body)
    assert status == 201, (status, made)
    sequence = json.loads(made)["sequence"]
    timings = {"downloading": [], "installed": []}
    done = 0
    for i in range(int(group[1:]), n, 10):
        if done == reporters:
            break
        token = tokens[f"dev-{i:06d}"]
        if call(url, "GET", "/api/v1/device/manifest?seq=0", token)[0] != 200:
            continue  # in a batch not open
        done += 1
        for state in ("downloading", "installed"):
            t = time.perf_counter()
            status, answer = call(url, "POST", "/api/v1/device/status", token,
                                  {"sequence": sequence, "state": state})
            timings[state].append((time.perf_counter() - t) * 1000)
            assert status == 204, (status, answer)
    return timings


def percentile(samples, p):
    """The nearest-rank `p`th percentile of `samples`: the ceil(p/100 * n)-th smallest of the n
    samples (1-based), so always one of them, and the largest once p/100 * n exceeds n - 1 (the
    p95 of 19 samples is their largest, of 20 the second largest). `p` is a whole percentage,
    1 to 100, so that the rank is exact integer arithmetic, never a float rounded up."""
    if not isinstance(p, int) or not 1 <= p <= 100:
        raise ValueError(f"percentile: p must be a whole percentage 1-100, not {p!r}")
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("percentile: no samples")
    rank = -(-p * len(ordered) // 100)  # ceil(p * n / 100), in integers
    return ordered[rank - 1]
