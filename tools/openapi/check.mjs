// Validates openapi.yaml against the official OpenAPI 3.1 JSON schema, then
// checks that every route tallyd serves (`tallyd --routes`) is documented
// with its method and the security its access class demands (api/auth.h),
// and that nothing is documented that tallyd does not serve.
// Usage: node tools/openapi/check.mjs openapi.yaml build/release/tallyd
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { Validator } from "@seriousme/openapi-schema-validator";
import YAML from "yaml";

const [specPath, tallyd] = process.argv.slice(2);
const text = readFileSync(specPath, "utf8");
const spec = YAML.parse(text);
let failed = false;
const fail = (msg) => { console.error("openapi: " + msg); failed = true; };

if (!String(spec.openapi || "").startsWith("3.1")) fail(`openapi version is ${spec.openapi}, expected 3.1.x`);
const validator = new Validator();
const res = await validator.validate(spec);
if (!res.valid) fail("schema validation failed:\n" + JSON.stringify(res.errors, null, 2));

// Every $ref must resolve inside the document.
const refs = [];
(function walk(v) {
  if (Array.isArray(v)) v.forEach(walk);
  else if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) { if (k === "$ref" && typeof x === "string") refs.push(x); else walk(x); }
  }
})(spec);
for (const r of refs) {
  if (!r.startsWith("#/")) { fail(`external $ref ${r}`); continue; }
  let node = spec;
  for (const part of r.slice(2).split("/")) node = node?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  if (node === undefined) fail(`unresolved $ref ${r}`);
}

const routes = execFileSync(tallyd, ["--routes"], { encoding: "utf8" }).trim().split("\n");
const served = new Set();
// What each access class of `tallyd --routes` must say as an operation's
// security (api/auth.h): the scopes that grant it, [] for any known token.
const securityOf = {
  public: [],
  token: [{ bearer: [] }],
  metrics: [{ bearer: [] }],
  read: [{ bearer: ["read"] }],
  write: [{ bearer: ["write"] }],
  ratelimit: [{ bearer: ["ratelimit"] }, { bearer: ["write"] }],
  admin: [{ bearer: ["admin"] }],
  replicate: [{ bearer: ["replicate"] }],
};
if (spec.components?.securitySchemes?.bearer?.scheme !== "bearer") fail("no bearer security scheme in components.securitySchemes");
for (const line of routes) {
  const [method, pattern, access] = line.split(" ");
  if (!(access in securityOf)) { fail(`route ${method} ${pattern}: unknown access class '${access}'`); continue; }
  const path = pattern.replace(/\{([a-z_]+)\.\.\.\}/g, "{$1}");
  const item = spec.paths?.[path];
  if (!item) { fail(`route ${method} ${pattern} is not in openapi.yaml (paths.${path})`); continue; }
  const methods = method === "ANY" ? ["get", "post"] : [method.toLowerCase()];
  for (const m of methods) {
    served.add(`${m} ${path}`);
    if (!item[m]) fail(`route ${method} ${pattern}: openapi.yaml has no '${m}' operation under ${path}`);
    else if (!item[m].responses) fail(`${m} ${path}: no responses`);
    else if (JSON.stringify(item[m].security) !== JSON.stringify(securityOf[access]))
      fail(`${m} ${path}: security ${JSON.stringify(item[m].security)}, but the route's class is ${access}: ${JSON.stringify(securityOf[access])}`);
  }
  if (method === "GET") served.add(`head ${path}`);   // every GET route answers HEAD too
  if (method === "ANY") for (const m of ["put", "delete", "patch", "head", "options"]) if (item[m]) {
    served.add(`${m} ${path}`);
    if (JSON.stringify(item[m].security) !== JSON.stringify(securityOf[access])) fail(`${m} ${path}: security differs from class ${access}`);
  }
}
for (const [path, item] of Object.entries(spec.paths || {})) {
  for (const m of ["get", "put", "post", "delete", "patch", "head", "options"]) {
    if (item[m] && !served.has(`${m} ${path}`)) fail(`openapi.yaml documents ${m.toUpperCase()} ${path}, which tallyd does not serve`);
  }
}
if (failed) process.exit(1);
console.log(`openapi: ${specPath} is valid OpenAPI ${spec.openapi} and documents all ${routes.length} routes`);
