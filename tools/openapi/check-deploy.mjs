// Checks the deployment files for what they promise: Kubernetes manifests
// parse, name their kind, probe /healthz (liveness) and /readyz (readiness)
// on tallyd, run as non-root; the Dockerfile is multi-stage on Debian 12,
// non-root, with a data volume, a HEALTHCHECK and 0.0.0.0 inside; anything
// listening beyond loopback takes its token file from a secret.
// Every gateway configuration under deploy/gateways asks only for policies
// that exist: /hook/<name> (and nginx's /_tally/<name>) must name a policy of
// deploy/gateways/policies.json, or of the policies ConfigMap in the same file.
// Usage: node tools/openapi/check-deploy.mjs Dockerfile deploy/kubernetes/*.yaml ...
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import YAML from "yaml";

let failed = false;
const fail = (m) => { console.error("deploy: " + m); failed = true; };
const [dockerfile, ...manifests] = process.argv.slice(2);

const df = readFileSync(dockerfile, "utf8");
const need = [
  [/^FROM debian:12\S* AS build/m, "a Debian 12 build stage"],
  [/^FROM debian:12/m, "a Debian 12 runtime stage"],
  [/^COPY --from=build/m, "copying the binary from the build stage"],
  [/^USER (?!0|root)\S+/m, "a non-root USER"],
  [/^VOLUME \[?"?\/data/m, "a /data VOLUME"],
  [/^HEALTHCHECK[^\n]*\\\n\s*CMD [^\n]*\/healthz/m, "a HEALTHCHECK on /healthz"],
  [/TALLY_BIND=0\.0\.0\.0/, "binding 0.0.0.0 inside the container"],
  [/TALLY_TOKENS=\/run\/secrets\//, "a token file from a secret (TALLY_TOKENS=/run/secrets/...) for the 0.0.0.0 bind"],
];
for (const [re, what] of need) if (!re.test(df)) fail(`${dockerfile}: missing ${what}`);

for (const f of manifests) {
  const docs = YAML.parseAllDocuments(readFileSync(f, "utf8"));
  for (const d of docs) {
    if (d.errors.length) { fail(`${f}: ${d.errors[0].message}`); continue; }
    const o = d.toJS();
    if (!o) continue;
    if (!o.apiVersion || !o.kind || !o.metadata?.name) { fail(`${f}: a document lacks apiVersion/kind/metadata.name`); continue; }
    const spec = o.kind === "Pod" ? o.spec : o.spec?.template?.spec;
    if (!spec) continue;
    const all = [...(spec.initContainers || []), ...(spec.containers || [])];
    const etcd = all.find((c) => c.name === "etcd");
    if (etcd && !all.some((c) => c.name === "tallyd")) {
      // tally's coordinator (deploy/etcd): an odd quorum of at least three,
      // each member on its own volume, ready only when it has a quorum
      const n = o.spec?.replicas;
      if (o.kind !== "StatefulSet" || !(n >= 3 && n % 2 === 1)) fail(`${f}: etcd is not a StatefulSet of an odd number (>= 3) of members`);
      if (!(o.spec?.volumeClaimTemplates || []).some((v) => (etcd.volumeMounts || []).some((m) => m.name === v.metadata?.name)))
        fail(`${f}: etcd's data directory is not on a volume claim per member`);
      if (etcd.readinessProbe?.httpGet?.path !== "/health") fail(`${f}: etcd readiness probe is not /health`);
      if (!(spec.securityContext?.runAsNonRoot || etcd.securityContext?.runAsNonRoot)) fail(`${f}: etcd not runAsNonRoot`);
      continue;
    }
    const t = all.find((c) => c.name === "tallyd");
    if (!t) { fail(`${f}: ${o.kind} ${o.metadata.name} has no tallyd container`); continue; }
    if (t.livenessProbe?.httpGet?.path !== "/healthz") fail(`${f}: tallyd liveness probe is not /healthz`);
    if (t.readinessProbe?.httpGet?.path !== "/readyz") fail(`${f}: tallyd readiness probe is not /readyz`);
    if (!(spec.securityContext?.runAsNonRoot || t.securityContext?.runAsNonRoot)) fail(`${f}: not runAsNonRoot`);
    const env = Object.fromEntries((t.env || []).map((e) => [e.name, e.value]));
    if (!env.TALLY_DATA_DIR) fail(`${f}: tallyd has no TALLY_DATA_DIR`);
    // tallyd refuses a non-loopback bind without tokens: the file must come
    // from a Secret volume mounted read-only
    const loopback = /^(127\.|::1$)/.test(env.TALLY_BIND || "127.0.0.1");
    if (!loopback) {
      const file = env.TALLY_TOKENS;
      const mount = file && (t.volumeMounts || []).find((m) => file.startsWith(m.mountPath.replace(/\/?$/, "/")));
      const vol = mount && (spec.volumes || []).find((v) => v.name === mount.name);
      if (!file) fail(`${f}: tallyd binds ${env.TALLY_BIND} without TALLY_TOKENS`);
      else if (!vol?.secret || !mount.readOnly) fail(`${f}: TALLY_TOKENS ${file} is not on a read-only Secret volume`);
    }
  }
}
const policiesOf = (text) => Object.keys(JSON.parse(text).policies || {});
const shared = policiesOf(readFileSync("deploy/gateways/policies.json", "utf8"));
const walk = (d) => readdirSync(d).flatMap((n) => (statSync(join(d, n)).isDirectory() ? walk(join(d, n)) : [join(d, n)]));
let hooks = 0;
for (const f of walk("deploy/gateways").filter((n) => /\.(ya?ml|conf)$/.test(n))) {
  const text = readFileSync(f, "utf8");
  let known = shared;
  if (/\.ya?ml$/.test(f)) {
    for (const d of YAML.parseAllDocuments(text).map((x) => x.toJS())) {
      if (d?.kind === "ConfigMap" && d.data?.["policies.json"]) known = policiesOf(d.data["policies.json"]);
    }
  }
  for (const m of text.matchAll(/\/(?:hook|_tally)\/([A-Za-z0-9_.-]+)/g)) {
    hooks++;
    if (!known.includes(m[1])) fail(`${f}: asks for policy '${m[1]}', which is not among ${known.join(", ")}`);
  }
}
if (hooks === 0) fail("found no /hook/<policy> in deploy/gateways");

if (failed) process.exit(1);
console.log(`deploy: Dockerfile and ${manifests.length} manifest files check out; ${hooks} gateway hooks name existing policies`);
