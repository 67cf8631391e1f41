// Checks deploy/monitoring against tallyd: every metric the Grafana dashboard
// and the Prometheus alert rules use is one tallyd exports (the `# TYPE`
// lines of its sources), and every PromQL expression of the dashboard parses
// (promtool checks them as recording rules, with Grafana's variables filled).
// Usage: node tools/openapi/check-monitoring.mjs DASHBOARD.json ALERTS.yml
import { readFileSync, readdirSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import YAML from "yaml";

const [dashPath, rulesPath] = process.argv.slice(2);
let failed = false;
const fail = (m) => { console.error("monitoring: " + m); failed = true; };

// What tallyd exports: "# TYPE name kind" in the C sources of cmd/, api/ and service/.
const exported = new Set(["up"]);
for (const dir of ["cmd", "api", "service"]) {
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".c"))) {
    for (const m of readFileSync(join(dir, f), "utf8").matchAll(/# TYPE (tally_[a-z0-9_]+) ([a-z]+)/g)) {
      exported.add(m[1]);
      if (m[2] === "histogram") for (const s of ["_bucket", "_sum", "_count"]) exported.add(m[1] + s);
    }
  }
}
if (exported.size < 10) fail(`found only ${exported.size} metrics in the sources: is this the repository root?`);

const uses = (where, expr) => {
  for (const m of expr.matchAll(/\b(tally_[a-z0-9_]+)/g))
    if (!exported.has(m[1])) fail(`${where}: ${m[1]} is not a metric tallyd exports`);
};

const dash = JSON.parse(readFileSync(dashPath, "utf8"));
if (!dash.title || !dash.uid) fail(`${dashPath}: no title or uid`);
const exprs = [];
const panels = (dash.panels || []).flatMap((p) => [p, ...(p.panels || [])]);
for (const p of panels) {
  if (p.type === "row") continue;
  if (p.datasource?.uid !== "${datasource}") fail(`${dashPath}: panel "${p.title}" does not use the $datasource variable`);
  if (!p.targets?.length) fail(`${dashPath}: panel "${p.title}" has no query`);
  for (const t of p.targets || []) {
    uses(`${dashPath}: panel "${p.title}"`, t.expr);
    exprs.push(t.expr);
  }
}
for (const v of dash.templating?.list || []) if (v.definition) uses(`${dashPath}: variable ${v.name}`, v.definition);

const rules = YAML.parse(readFileSync(rulesPath, "utf8"));
let nrules = 0;
for (const g of rules.groups || []) for (const r of g.rules || []) { uses(`${rulesPath}: ${r.alert || r.record}`, r.expr); nrules++; }

// The dashboard's queries as recording rules, for promtool's parser.
const dir = mkdtempSync(join(tmpdir(), "tally-dash-"));
try {
  const filled = exprs.map((e, i) => ({
    record: `dashboard:query_${i}`,
    expr: e.replaceAll("$__rate_interval", "5m").replaceAll("$job", ".*").replaceAll("$instance", ".*"),
  }));
  writeFileSync(join(dir, "dashboard-rules.yml"), YAML.stringify({ groups: [{ name: "dashboard", rules: filled }] }));
  execFileSync("promtool", ["check", "rules", join(dir, "dashboard-rules.yml")], { stdio: ["ignore", "ignore", "inherit"] });
} catch (e) {
  fail(`${dashPath}: promtool refuses a query (above)`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (failed) process.exit(1);
console.log(`monitoring: ${exprs.length} dashboard queries parse; they and ${nrules} alert rules use only the ${exported.size} metrics tallyd exports`);
