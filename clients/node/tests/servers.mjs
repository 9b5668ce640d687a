// Test servers on loopback: one redis-server (with or without the module),
// or a three-master cluster, each on a free port, killed at exit.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const MODULE = process.env.REDIS_CELL_MODULE ?? join(repo, "target", "release", "libredis_cell.so");
/** The server binary: REDIS_SERVER (the entry script sets it per server of the matrix). */
export const SERVER = process.env.REDIS_SERVER ?? "/usr/bin/redis-server";
export const SERVER_NAME = process.env.REDIS_SERVER_NAME ?? "redis-7.0";

const children = new Set();
process.on("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

function bindable(port) {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

/**
 * A loopback port that is free now, in 10000..20000, below the kernel's
 * ephemeral range (32768..60999 here) where clients' own connections take
 * ports; for a cluster node its bus port (+10000, in 20000..30000) is free
 * too. Another process may still take it before the server binds: the
 * caller starts again on another port when that happens.
 */
export async function freePort({ cluster = false } = {}) {
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * 10_000);
    if ((await bindable(port)) && (!cluster || (await bindable(port + 10_000)))) return port;
  }
}

/** The server's major.minor, from --version (Valkey reports its own). */
export function serverVersion(bin = SERVER) {
  const out = execFileSync(bin, ["--version"]).toString();
  const m = /v=(\d+)\.(\d+)/.exec(out);
  if (!m) throw new Error(`cannot read the version of ${bin}: ${out}`);
  return { major: Number(m[1]), minor: Number(m[2]), valkey: /valkey/i.test(out) };
}

/** Functions (the twin) need Redis 7.0+ or Valkey. */
export function hasFunctions(bin = SERVER) {
  const v = serverVersion(bin);
  return v.valkey || v.major >= 7;
}

function ping(port) {
  return new Promise((resolve) => {
    const c = createConnection({ host: "127.0.0.1", port });
    c.once("error", () => resolve(false));
    c.once("connect", () => c.write("PING\r\n"));
    c.once("data", (d) => {
      c.destroy();
      resolve(d.toString().startsWith("+PONG"));
    });
  });
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

/**
 * Starts a server; `module: false` starts it without redis-cell (the twin's
 * case). Fails loudly if it does not answer within 30 s or the module did
 * not load; if its port was taken between the check and its bind, starts
 * again on another port (up to five times).
 */
export async function startServer({ module = true, cluster = false, bin = SERVER } = {}) {
  for (let attempt = 1; ; attempt++) {
    const started = await spawnServer({ module, cluster, bin, port: await freePort({ cluster }) });
    if (started.server) return started.server;
    if (attempt === 5 || !/already in use/i.test(started.log)) {
      throw new Error(`${bin} did not start on port ${started.port}${module ? ` with ${MODULE}` : ""}: ${started.log}`);
    }
  }
}

/** One start on `port`: `{ server }`, or `{ port, log }` if it exited or did not answer. */
async function spawnServer({ module, cluster, bin, port }) {
  const dir = mkdtempSync(join(tmpdir(), "cell-node-"));
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir];
  if (module) args.push("--loadmodule", MODULE);
  if (cluster) args.push("--cluster-enabled", "yes", "--cluster-config-file", join(dir, "nodes.conf"));
  // The server logs to stdout, and reports a refused configuration on stderr.
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  let exited = false;
  child.once("exit", () => (exited = true));
  const stop = () => {
    child.kill("SIGKILL");
    children.delete(child);
    rmSync(dir, { recursive: true, force: true });
  };
  // A bound for a hung start, not a timing: a loaded CI machine once took
  // over 10 s to bring a cluster node up.
  const deadline = Date.now() + 30_000;
  while (!(await ping(port))) {
    if (exited || Date.now() > deadline) {
      stop();
      return { port, log };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  // Another process's server may answer on a port ours could not bind.
  const identity = await raw(port, "INFO", "server");
  if (exited || !identity.includes(`process_id:${child.pid}\r\n`)) {
    stop();
    return { port, log: `${log}\nport ${port} already in use by another server` };
  }
  // Only what the server printed while starting is kept; the rest is dropped.
  child.stdout.removeAllListeners("data");
  child.stdout.resume();
  if (module) {
    const info = await raw(port, "COMMAND", "INFO", "CL.THROTTLE");
    if (info.startsWith("*1\r\n*-1") || info.startsWith("*1\r\n$-1")) {
      stop();
      throw new Error(`the module did not load on port ${port}`);
    }
  }
  /**
   * Kills the server and starts a fresh one on the same port, as a crash
   * and a restart without persistence do: every key and function is gone.
   */
  async function restart() {
    child.kill("SIGKILL");
    await new Promise((r) => (exited ? r() : child.once("exit", r)));
    stop();
    const again = await spawnServer({ module, cluster, bin, port });
    if (!again.server) throw new Error(`${bin} did not start again on port ${port}: ${again.log}`);
    return again.server;
  }
  return { server: { port, url: `redis://127.0.0.1:${port}`, stop, restart } };
}

/** A cluster of three masters on loopback, slots split evenly. */
export async function startCluster({ module = true, bin = SERVER } = {}) {
  const nodes = await Promise.all([0, 1, 2].map(() => startServer({ module, cluster: true, bin })));
  const ranges = [
    [0, 5460],
    [5461, 10922],
    [10923, 16383],
  ];
  for (let i = 0; i < 3; i++) {
    const slots = [];
    for (let s = ranges[i][0]; s <= ranges[i][1]; s++) slots.push(s);
    await raw(nodes[i].port, "CLUSTER", "ADDSLOTS", ...slots);
  }
  // Every node meets every other: none waits for gossip to learn of the third.
  for (let i = 0; i < 3; i++) {
    for (let j = i + 1; j < 3; j++) await raw(nodes[i].port, "CLUSTER", "MEET", "127.0.0.1", nodes[j].port);
  }
  const deadline = Date.now() + 60_000;
  for (;;) {
    const states = await Promise.all(nodes.map((n) => raw(n.port, "CLUSTER", "INFO")));
    if (states.every((s) => s.includes("cluster_state:ok") && s.includes("cluster_known_nodes:3"))) break;
    if (Date.now() > deadline) throw new Error(`the cluster did not come up: ${states.join("\n")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    nodes,
    ports: nodes.map((n) => n.port),
    stop() {
      for (const n of nodes) n.stop();
    },
  };
}
