// Checks the deployment files for what they promise: Kubernetes manifests
// parse, name their kind, probe /healthz (liveness) and /readyz (readiness)
// on tallyd, run as non-root; the Dockerfile is multi-stage on Debian 12,
// non-root, with a data volume, a HEALTHCHECK and 0.0.0.0 inside.
// Usage: node tools/openapi/check-deploy.mjs Dockerfile deploy/kubernetes/*.yaml
import { readFileSync } from "node:fs";
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
    const t = all.find((c) => c.name === "tallyd");
    if (!t) { fail(`${f}: ${o.kind} ${o.metadata.name} has no tallyd container`); continue; }
    if (t.livenessProbe?.httpGet?.path !== "/healthz") fail(`${f}: tallyd liveness probe is not /healthz`);
    if (t.readinessProbe?.httpGet?.path !== "/readyz") fail(`${f}: tallyd readiness probe is not /readyz`);
    if (!(spec.securityContext?.runAsNonRoot || t.securityContext?.runAsNonRoot)) fail(`${f}: not runAsNonRoot`);
    const env = Object.fromEntries((t.env || []).map((e) => [e.name, e.value]));
    if (!env.TALLY_DATA_DIR) fail(`${f}: tallyd has no TALLY_DATA_DIR`);
  }
}
if (failed) process.exit(1);
console.log(`deploy: Dockerfile and ${manifests.length} manifest files check out`);
