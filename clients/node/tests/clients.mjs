// The clients every test runs with: ioredis 5, node-redis 4 and 5, single
// server and cluster, and the engines a server offers.
import { after, before, describe, test } from "node:test";
import Redis from "ioredis";
import { createClient as createClient4, createCluster as createCluster4 } from "redis4";
import { createClient as createClient5, createCluster as createCluster5 } from "redis5";
import { loadFunctions } from "../dist/esm/index.js";
import { hasFunctions, startCluster, startServer } from "./servers.mjs";

export const CLIENTS = {
  ioredis: {
    async single(port) {
      const c = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1 });
      c.on("error", () => {});
      await c.connect();
      return { client: c, close: () => c.quit() };
    },
    async cluster(ports) {
      const c = new Redis.Cluster(ports.map((port) => ({ host: "127.0.0.1", port })), { lazyConnect: true });
      c.on("error", () => {});
      await c.connect();
      return { client: c, close: () => c.quit() };
    },
  },
  "node-redis-4": {
    async single(port) {
      const c = createClient4({ socket: { host: "127.0.0.1", port } });
      await c.connect();
      return { client: c, close: () => c.quit() };
    },
    async cluster(ports) {
      const c = createCluster4({ rootNodes: ports.map((port) => ({ socket: { host: "127.0.0.1", port } })) });
      await c.connect();
      return { client: c, close: () => c.quit() };
    },
  },
  "node-redis-5": {
    async single(port) {
      const c = createClient5({ socket: { host: "127.0.0.1", port } });
      await c.connect();
      return { client: c, close: () => c.quit() };
    },
    async cluster(ports) {
      const c = createCluster5({ rootNodes: ports.map((port) => ({ socket: { host: "127.0.0.1", port } })) });
      await c.connect();
      return { client: c, close: () => c.quit() };
    },
  },
};

/** The clients of this run: CELL_NODE_CLIENTS (comma-separated), or all. */
export function clientsInUse() {
  const names = (process.env.CELL_NODE_CLIENTS ?? Object.keys(CLIENTS).join(",")).split(",");
  for (const n of names) if (!(n in CLIENTS)) throw new Error(`unknown client ${n} in CELL_NODE_CLIENTS`);
  return names;
}

/**
 * The servers of one run: the module's, and one without the module with
 * the twin loaded where the server has Functions (Redis 7.0+, Valkey).
 * A server that cannot offer the twin runs the module's cases only; the
 * entry script prints that.
 */
export async function engines() {
  const out = [{ engine: "module", server: await startServer() }];
  if (await hasFunctions()) {
    const server = await startServer({ module: false });
    const { client, close } = await CLIENTS.ioredis.single(server.port);
    await loadFunctions(client);
    await close();
    out.push({ engine: "functions", server });
  }
  return out;
}

/** The module's cluster and the twin's (where the server has Functions); neither is left running if one fails. */
export async function clusters() {
  const twin = async () => {
    const cluster = await startCluster({ module: false });
    const { client, close } = await CLIENTS.ioredis.cluster(cluster.ports);
    await loadFunctions(client);
    await close();
    return { engine: "functions", cluster };
  };
  const started = await Promise.allSettled([
    startCluster().then((cluster) => ({ engine: "module", cluster })),
    ...((await hasFunctions()) ? [twin()] : []),
  ]);
  const failed = started.find((r) => r.status === "rejected");
  if (failed) {
    for (const r of started) if (r.status === "fulfilled") r.value.cluster.stop();
    throw failed.reason;
  }
  return started.map((r) => r.value);
}

/**
 * The cluster tests of a file, where the entry script runs them
 * (CELL_NODE_CLUSTER): under `title`, one test a client of this run, which
 * calls `body({ name, engine, client })` on each engine's cluster (see
 * `clusters`) with that client connected to it.
 */
export function clusterTests(title, body) {
  if (process.env.CELL_NODE_CLUSTER === "0") return;
  describe(title, () => {
    let cs;
    before(async () => (cs = await clusters()));
    after(() => cs.forEach((c) => c.cluster.stop()));
    for (const name of clientsInUse()) {
      test(`three masters, ${name}`, async () => {
        for (const { engine, cluster } of cs) {
          const { client, close } = await CLIENTS[name].cluster(cluster.ports);
          try {
            await body({ name, engine, client });
          } finally {
            await close();
          }
        }
      });
    }
  });
}
