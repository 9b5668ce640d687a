// Test servers on loopback, started by the test kit: one `testkit serve`
// child per test process, asked one request a line on its stdin, answering
// one JSON line each on its stdout (testkit/src/serve.rs). When this
// process ends, its stdin closes and the kit kills every server it started.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createConnection } from "node:net";
import { join, dirname } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
/** The kit's binary: TESTKIT (the entry script sets it), else the debug build. */
const TESTKIT = process.env.TESTKIT ?? join(repo, "target", "debug", "testkit");

let kit;

/** Starts the kit's child: `{ child, waiting, gone }`. */
function startKit() {
  if (!existsSync(TESTKIT)) throw new Error(`no test kit at ${TESTKIT} (cargo build -p testkit)`);
  const child = spawn(TESTKIT, ["serve"], { stdio: ["pipe", "pipe", "pipe"] });
  // Answers come in the order of the requests.
  const k = { child, waiting: [], gone: undefined };
  let stderr = "";
  const fail = (e) => {
    k.gone = e;
    for (const w of k.waiting.splice(0)) w.reject(e);
  };
  child.once("error", (e) => fail(new Error(`${TESTKIT} serve: ${e.message}`)));
  child.stdin.on("error", (e) => fail(new Error(`${TESTKIT} serve: ${e.message}: ${stderr}`)));
  child.stderr.on("data", (d) => (stderr += d));
  child.once("close", (code, signal) => fail(new Error(`${TESTKIT} serve ended (${signal ?? code}): ${stderr}`)));
  createInterface({ input: child.stdout }).on("line", (line) => {
    const w = k.waiting.shift();
    if (!w) return fail(new Error(`${TESTKIT} serve answered what was not asked: ${line}`));
    const answer = JSON.parse(line);
    if (answer.error !== undefined) w.reject(new Error(`${w.request}: ${answer.error}`));
    else w.resolve(answer);
    if (k.waiting.length === 0) alive(k, false);
  });
  child.stdin.unref();
  child.stderr.unref();
  alive(k, false);
  return k;
}

/**
 * The kit keeps this process alive only while it owes an answer: its
 * stdout, and the child itself (if it dies, its exit is the answer).
 */
function alive(k, owing) {
  for (const h of [k.child, k.child.stdout]) {
    if (owing) h.ref();
    else h.unref();
  }
}

/** One request to the kit: its answer, or an error with the kit's text (the server's log). */
function ask(...words) {
  kit ??= startKit();
  if (kit.gone) return Promise.reject(kit.gone);
  const request = words.join(" ");
  return new Promise((resolve, reject) => {
    kit.waiting.push({ request, resolve, reject });
    alive(kit, true);
    kit.child.stdin.write(`${request}\n`);
  });
}

/** The kit's `stop ID`, asked once for each id (a restarted server keeps its id). */
const stops = new Map();
function stopper(id) {
  return () => {
    if (!stops.has(id)) stops.set(id, ask("stop", String(id)));
    return stops.get(id);
  };
}

/** A server of the kit's answer: `{ port, url, stop, restart }`. */
function server(answer) {
  const { id, port } = answer;
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop: stopper(id),
    /**
     * Kills the server and starts it again on the same port and directory,
     * as a crash and a restart without persistence do: every key and
     * function is gone.
     */
    restart: async () => server(await ask("restart", String(id))),
  };
}

/** The kit's options for a server with or without the module. */
const options = (module) => (module ? [] : ["--no-module"]);

/**
 * Starts a server (REDIS_SERVER, the entry script's server of the matrix);
 * `module: false` starts it without redis-cell (the twin's case). Fails
 * loudly, with the server's log, if it does not come up or the module did
 * not load.
 */
export async function startServer({ module = true } = {}) {
  return server(await ask("server", ...options(module)));
}

/** A cluster of three masters on loopback, slots split evenly in order. */
export async function startCluster({ module = true } = {}) {
  const answer = await ask("cluster", "3", ...options(module));
  const nodes = answer.nodes.map(server);
  return { nodes, ports: answer.ports, stop: stopper(answer.id) };
}

/** Raw commands for setup (no client library): returns the first reply line. */
export function raw(port, ...args) {
  return new Promise((resolve, reject) => {
    const c = createConnection({ host: "127.0.0.1", port });
    let data = "";
    c.once("error", reject);
    c.on("data", (d) => {
      data += d.toString();
      if (data.endsWith("\r\n")) {
        c.destroy();
        resolve(data);
      }
    });
    c.write(`*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join(""));
  });
}

let version;

/**
 * The server's major.minor as it reports itself (INFO server: Valkey's own
 * version, not the Redis version it claims to be compatible with), read
 * once from a server started for it.
 */
export function serverVersion() {
  version ??= (async () => {
    const s = await startServer({ module: false });
    try {
      const info = await raw(s.port, "INFO", "server");
      const field = (name) => new RegExp(`^${name}:(\\d+)\\.(\\d+)`, "m").exec(info);
      const valkey = field("valkey_version");
      const m = valkey ?? field("redis_version");
      if (!m) throw new Error(`no version in INFO server: ${info}`);
      return { major: Number(m[1]), minor: Number(m[2]), valkey: valkey !== null };
    } finally {
      await s.stop();
    }
  })();
  return version;
}

/** Functions (the twin) need Redis 7.0+ or Valkey. */
export async function hasFunctions() {
  const v = await serverVersion();
  return v.valkey || v.major >= 7;
}
