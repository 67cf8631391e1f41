// Runs the examples of the README files as written, against a fresh tallyd,
// and compares each answer with the one the document shows, so the docs
// cannot drift from the server.  HACKING.md ("Examples in the docs") is the
// user's side of the convention; in short:
//
//   ```console                       an executed block
//   $ curl -s localhost:8080/uv/a    a command: "$ " then the command as a user types it;
//     -d '{"items":["x"]}'             continued while a quote is open or the line ends in "\"
//   {"updated":true}                 the answer shown: every line up to the next "$ "
//   ```
//
// - Each file gets its own fresh tallyd (binary from the command line, free
//   port, scratch data directory); blocks run in order, so state carries from
//   one block to the next, as for a reader going down the page.
// - `$ tallyd ARGS &` (re)starts a tallyd with ARGS, its --port, --data-dir
//   and --pid-file replaced by the test's.  The port a document uses (ARGS'
//   --port, else 8080) names that server: `localhost:PORT` and
//   `127.0.0.1:PORT` in commands are rewritten to its real port.  The 8080
//   one starts by itself, with no options, on first use.  Each tallyd also
//   serves the Redis protocol (--resp-port 0, unless it serves TLS):
//   `redis-cli -p 6380` in a command is rewritten to the 8080 one's port.
// - Commands run with sh in a scratch directory holding links to the
//   repository's top-level files (so `deploy/gateways/policies.json` works)
//   and `data` (the tallyd's data directory); `tallyd` on PATH is the binary
//   under test.
// - Comparison: trailing spaces and carriage returns are ignored; "..." in a
//   line matches any text; a line that is only "..." matches any number of
//   lines; an answer of one line may be shown wrapped over several (the shown
//   lines are joined with their indentation removed).  A command shown
//   without an answer must exit 0 and must not answer a tally error
//   (`{"error":...}`).
// - `<!-- example: skip REASON -->` just before a block skips it (it needs a
//   gateway, Kubernetes, Docker, ...); REASON is required.  Every other
//   shell block (sh, bash, shell, an untagged fence or an indented block) is
//   an error, so an example cannot escape the test by its formatting; `json`
//   blocks must parse.
//
// Usage: node tools/check-examples.mjs TALLYD FILE.md...
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, mkdirSync, openSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const COMMAND_TIMEOUT_MS = 15000;
const [tallydArg, ...files] = process.argv.slice(2);
if (!tallydArg || files.length === 0) {
  console.error("usage: node tools/check-examples.mjs TALLYD FILE.md...");
  process.exit(2);
}
const tallyd = resolve(tallydArg);
const repo = resolve(dirname(new URL(import.meta.url).pathname), "..");

let failures = 0;
let executed = 0;
let skipped = 0;
const fail = (where, msg) => { console.error(`${where}: ${msg}`); failures++; };

// ---------------------------------------------------------------- parsing --

// True while `text` leaves a quote open or ends with a backslash: the
// command goes on on the next line (sh's rules, reduced to what docs use).
function command_continues(text) {
  let quote = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === "'") { if (c === "'") quote = null; continue; }
    if (c === "\\") { i++; continue; }
    if (quote === '"') { if (c === '"') quote = null; continue; }
    if (c === "'" || c === '"') quote = c;
  }
  return quote !== null || /\\$/.test(text);
}

// The blocks of one Markdown file: {line, lang, body: [lines], skip}.  An
// indented code block (four spaces after a blank line, outside a list) is
// reported with lang "indented".  A skip marker applies to the block right
// after it (blank lines between are allowed).
function markdown_blocks(text) {
  const lines = text.split("\n");
  const blocks = [];
  let skip = null;
  let prev = "";
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const marker = line.match(/^\s*<!--\s*example:\s*skip\b\s*(.*?)\s*-->\s*$/);
    if (marker) { skip = { line: i + 1, reason: marker[1] }; continue; }
    if (line.trim() === "") continue;
    const fence = line.match(/^(\s*)(```+|~~~+)\s*([\w-]*)/);
    if (fence) {
      const close = new RegExp("^\\s*" + fence[2][0] + "{" + fence[2].length + ",}\\s*$");
      const start = i + 1;
      const body = [];
      for (i++; i < lines.length && !close.test(lines[i]); i++) body.push(lines[i].slice(fence[1].length));
      blocks.push({ line: start, lang: fence[3] || "", body, skip });
    } else if (/^( {4}|\t)/.test(line) && lines[i - 1].trim() === "" && !/^(\s|[-*+]\s|\d+\.\s)/.test(prev)) {
      blocks.push({ line: i + 1, lang: "indented", body: [line], skip });
      while (i + 1 < lines.length && (/^( {4}|\t)/.test(lines[i + 1]) || lines[i + 1].trim() === "")) i++;
    }
    skip = null;
    prev = lines[i];
  }
  return blocks;
}

// The commands of a console block: {line, text, expected: [lines]}.
function console_commands(block, where) {
  const cmds = [];
  let cur = null;
  for (let j = 0; j < block.body.length; j++) {
    const line = block.body[j];
    if (line.startsWith("$ ")) {
      cur = { line: block.line + 1 + j, text: line.slice(2), expected: [] };
      while (command_continues(cur.text) && j + 1 < block.body.length) cur.text += "\n" + block.body[++j];
      cmds.push(cur);
    } else if (cur) {
      cur.expected.push(line);
    } else if (line.trim() !== "") {
      fail(where, `console block: '${line}' comes before any '$ ' command`);
    }
  }
  for (const c of cmds) while (c.expected.length && c.expected[c.expected.length - 1].trim() === "") c.expected.pop();
  return cmds;
}

// ------------------------------------------------------------- comparing --

const glob = (pattern) => new RegExp("^" + pattern.split("...").map((p) =>
  p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*") + "$", "s");

function lines_match(exp, act, i = 0, j = 0) {
  if (i === exp.length) return j === act.length;
  if (exp[i].trim() === "...") {
    for (let k = j; k <= act.length; k++) if (lines_match(exp, act, i + 1, k)) return true;
    return false;
  }
  return j < act.length && glob(exp[i]).test(act[j]) && lines_match(exp, act, i + 1, j + 1);
}

function answer_matches(expected, actualText) {
  const clean = (l) => l.replace(/\r$/, "").replace(/\s+$/, "");
  const act = actualText.replace(/\n$/, "").split("\n").map(clean);
  const exp = expected.map(clean);
  if (lines_match(exp, act)) return true;
  return act.length === 1 && exp.length > 1 && lines_match([exp.map((l) => l.trim()).join("")], act);
}

// ---------------------------------------------------------------- tallyd --

// A tallyd for one document, in a scratch directory.
class Server {
  constructor(scratch, docPort) { this.scratch = scratch; this.proc = null; this.port = 0; this.docPort = docPort; }

  async start(args, where) {
    await this.stop();
    const argv = (spawnSync("sh", ["-c", `for a in ${args}; do printf '%s\\0' "$a"; done`], { cwd: this.scratch })
      .stdout.toString().split("\0").filter((a) => a !== ""));
    const own = [];
    for (let k = 0; k < argv.length; k++) {
      if (argv[k] === "--port" || argv[k] === "--data-dir") { k++; continue; }
      if (argv[k] === "--pid-file") { k++; own.push(argv[k - 1], join(this.scratch, `tallyd-${this.docPort}.pid`)); continue; }
      if (/^--(port|data-dir|pid-file)=/.test(argv[k])) continue;
      own.push(argv[k]);
    }
    const own_dir = /(^|\s)--data-dir\b/.test(args);
    const data = join(this.scratch, own_dir ? `data-${this.docPort}` : "data");
    const log = join(this.scratch, `tallyd-${this.docPort}.log`);
    const fd = openSync(log, "w");
    // the Redis protocol's port too (`redis-cli -p 6380` examples), unless
    // the server speaks TLS, which that port refuses
    if (!own.some((a) => /^--(resp-port|tls-cert)\b/.test(a))) own.push("--resp-port", "0");
    this.proc = spawn(tallyd, ["--port", "0", "--data-dir", data, ...own],
      { cwd: this.scratch, stdio: ["ignore", fd, fd] });
    closeSync(fd);
    this.exited = new Promise((r) => this.proc.on("exit", r));
    for (let t = 0; t < 200; t++) {
      const m = readFileSync(log, "utf8").match(/listening on [\d.]+:(\d+)[\s\S]*ready:/);
      if (m && this.proc.exitCode === null) {
        this.port = m[1];
        this.respPort = (m[0].match(/Redis protocol on \S+:(\d+);/) || [null, 0])[1];
        return true;
      }
      if (this.proc.exitCode !== null) break;
      await sleep(50);
    }
    fail(where, `tallyd ${own.join(" ")} did not start:\n${readFileSync(log, "utf8")}`);
    await this.stop();
    return false;
  }

  // SIGTERM (a clean stop, final snapshot), SIGKILL if that hangs.
  async stop() {
    if (!this.proc) return;
    if (this.proc.exitCode === null) {
      this.proc.kill("SIGTERM");
      const timer = setTimeout(() => this.proc.kill("SIGKILL"), COMMAND_TIMEOUT_MS);
      await this.exited;
      clearTimeout(timer);
    }
    this.proc = null;
  }
}

const ADDRESS = /\b(localhost|127\.0\.0\.1):(\d+)\b/g;
// `redis-cli -p 6380` talks to the default server's Redis protocol port
// (what `make run` serves next to 8080).
const REDIS_CLI = /\bredis-cli -p 6380\b/g;

// Runs one command with sh in its own process group, killed whole when it
// outlives COMMAND_TIMEOUT_MS.
function run_shell(text, cwd, env) {
  return new Promise((resolveRun) => {
    const p = spawn("sh", ["-c", text], { cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => { out += d; });
    p.stderr.on("data", (d) => { err += d; });
    const timer = setTimeout(() => process.kill(-p.pid, "SIGKILL"), COMMAND_TIMEOUT_MS);
    p.on("close", (code, signal) => { clearTimeout(timer); resolveRun({ code, signal, out, err }); });
  });
}

// ------------------------------------------------------------------- main --

async function check_file(file) {
  const text = readFileSync(file, "utf8");
  const scratch = mkdtempSync(join(tmpdir(), "tally-examples-"));
  for (const name of readdirSync(repo)) {
    if (name === "data" || name === "build" || name.startsWith(".")) continue;
    symlinkSync(join(repo, name), join(scratch, name));
  }
  const bin = join(scratch, ".bin");
  mkdirSync(bin);
  symlinkSync(tallyd, join(bin, "tallyd"));
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH}` };
  const servers = new Map();   // the document's port -> its Server
  const server_for = (port) => {
    if (!servers.has(port)) servers.set(port, new Server(scratch, port));
    return servers.get(port);
  };
  try {
    for (const block of markdown_blocks(text)) {
      const where = `${file}:${block.line}`;
      if (block.skip) {
        if (!block.skip.reason) fail(`${file}:${block.skip.line}`, "'example: skip' needs a reason");
        skipped++;
        continue;
      }
      if (block.lang === "json") {
        try { JSON.parse(block.body.join("\n")); } catch (e) { fail(where, `json block does not parse: ${e.message}`); }
        continue;
      }
      if (block.lang !== "console") {
        if (["", "sh", "bash", "shell", "indented"].includes(block.lang)) {
          fail(where, `${block.lang || "untagged"} code block: make it a 'console' block (executed) or mark it <!-- example: skip REASON -->`);
        }
        continue;
      }
      for (const cmd of console_commands(block, where)) {
        const at = `${file}:${cmd.line}`;
        executed++;
        const start = cmd.text.match(/^tallyd\s+(.*?)\s*&\s*$/s);
        if (start) {
          const port = (start[1].match(/--port[ =](\d+)/) || [null, "8080"])[1];
          await server_for(port).start(start[1], at);
          continue;
        }
        // Every address the command uses is a tallyd of this document: the
        // default one (8080) starts on first use, others by `$ tallyd ... &`.
        let ok = true;
        const redis_cli = REDIS_CLI.test(cmd.text);
        REDIS_CLI.lastIndex = 0;
        if (redis_cli && !server_for("8080").proc) ok = (await server_for("8080").start("", at)) && ok;
        for (const [, , port] of cmd.text.matchAll(ADDRESS)) {
          const s = server_for(port);
          if (!s.proc && port === "8080") ok = (await s.start("", at)) && ok;
          else if (!s.proc) { fail(at, `no \`$ tallyd --port ${port} ... &\` before this command`); ok = false; }
        }
        if (!ok) continue;
        const command = cmd.text.replace(ADDRESS, (_, host, port) => `127.0.0.1:${servers.get(port).port}`)
          .replace(REDIS_CLI, () => `redis-cli -p ${servers.get("8080").respPort}`);
        const r = await run_shell(command, scratch, env);
        const answer = r.out + r.err;
        if (process.env.EXAMPLES_SHOW) console.log(`${at}: $ ${cmd.text}\n${answer}`);
        if (r.code !== 0) {
          fail(at, `\`${cmd.text}\` ${r.signal === "SIGKILL" ? `timed out (${COMMAND_TIMEOUT_MS / 1000} s)` : `exited with ${r.signal || r.code}`}:\n${answer}`);
        } else if (cmd.expected.length === 0) {
          if (/^\s*\{"error":/m.test(r.out)) fail(at, `\`${cmd.text}\` answered an error:\n${r.out}`);
        } else if (!answer_matches(cmd.expected, r.out)) {
          fail(at, `\`${cmd.text}\`\n  the document shows:\n    ${cmd.expected.join("\n    ")}\n  tallyd answered:\n    ${r.out.replace(/\n$/, "").split("\n").join("\n    ")}`);
        }
      }
    }
  } finally {
    for (const srv of servers.values()) await srv.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

for (const f of files) await check_file(f);
console.log(`examples: ${executed} commands run, ${skipped} blocks skipped, ${failures} failed (${files.join(" ")})`);
process.exit(failures ? 1 : 0);
