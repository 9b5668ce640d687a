import { asCellError } from "./replies.js";

/** A reply as the clients decode RESP2: integers, strings, nil, arrays. */
export type Reply = number | string | null | Buffer | Reply[];

/**
 * What the package needs from a client: send one command (routed by its
 * first key in a cluster), run a few commands as one MULTI/EXEC on the node
 * owning `key`, and reach every master (FUNCTION LOAD must go to each).
 */
export interface Adapter {
  send(args: readonly (string | number)[], key?: string, readonly?: boolean): Promise<Reply>;
  transaction(key: string, commands: readonly (readonly (string | number)[])[]): Promise<Reply[]>;
  masters(): Promise<Adapter[]>;
  readonly cluster: boolean;
}

/** `sendCommand` as rate-limit-redis takes it: `(...args) => reply`. */
export type SendCommandFn = (...args: string[]) => Promise<unknown>;

/** rate-limit-redis's cluster form: the key and whether the command reads only. */
export type SendCommandClusterFn = (details: {
  key?: string;
  isReadOnly: boolean;
  command: string[];
}) => Promise<unknown>;

interface IoRedisLike {
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
  multi(commands: (string | number)[][]): { exec(): Promise<[Error | null, unknown][] | null> };
  nodes?: (role: "master") => IoRedisLike[];
  isCluster?: boolean;
}

interface NodeRedisMulti {
  addCommand(args: string[]): NodeRedisMulti;
  exec(): Promise<unknown[]>;
}

interface NodeRedisLike {
  sendCommand(...a: unknown[]): Promise<unknown>;
  multi(routing?: string): NodeRedisMulti;
}

interface NodeRedisClusterMulti {
  // v4: (firstKey, args, transformReply); v5: (firstKey, isReadonly, args, transformReply).
  addCommand(firstKey: string | undefined, ...rest: unknown[]): NodeRedisClusterMulti;
  exec(): Promise<unknown[]>;
}

interface NodeRedisClusterLike {
  sendCommand(...a: unknown[]): Promise<unknown>;
  multi(routing?: string): NodeRedisClusterMulti;
  masters: unknown[];
  nodeClient(node: unknown): NodeRedisLike | Promise<NodeRedisLike>;
}

const strings = (args: readonly (string | number)[]): string[] => args.map(String);

async function wrap<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    throw asCellError(e);
  }
}

function fromIoRedis(c: IoRedisLike): Adapter {
  const cluster = typeof c.nodes === "function" && c.isCluster === true;
  return {
    cluster,
    send: (args) => wrap(c.call(String(args[0]), ...strings(args.slice(1))) as Promise<Reply>),
    async transaction(_key, commands) {
      // ["call", ...]: a pipeline's methods are lower-case command names;
      // call takes any command, a module's included.
      const out = await wrap(c.multi(commands.map((x) => ["call", ...strings(x)])).exec());
      if (out === null) throw new Error("redis-cell: the transaction was discarded");
      return out.map(([err, value]) => {
        if (err) throw asCellError(err);
        return value as Reply;
      });
    },
    masters: async () => (cluster && c.nodes ? c.nodes("master").map(fromIoRedis) : [fromIoRedis(c)]),
  };
}

function fromNodeRedis(c: NodeRedisLike): Adapter {
  return {
    cluster: false,
    send: (args) => wrap(c.sendCommand(strings(args)) as Promise<Reply>),
    async transaction(_key, commands) {
      let m = c.multi();
      for (const x of commands) m = m.addCommand(strings(x));
      return (await wrap(m.exec())) as Reply[];
    },
    masters: async () => [fromNodeRedis(c)],
  };
}

function fromNodeRedisCluster(c: NodeRedisClusterLike): Adapter {
  return {
    cluster: true,
    send: (args, key, readonly) => wrap(c.sendCommand(key, readonly ?? false, strings(args)) as Promise<Reply>),
    async transaction(key, commands) {
      let m = c.multi(key);
      const v4 = m.addCommand.length === 3;
      for (const x of commands) m = v4 ? m.addCommand(key, strings(x)) : m.addCommand(key, false, strings(x));
      return (await wrap(m.exec())) as Reply[];
    },
    async masters() {
      return Promise.all(c.masters.map(async (node) => fromNodeRedis(await c.nodeClient(node))));
    },
  };
}

/** rate-limit-redis's `sendCommand` (one server): no transactions needed by its stores. */
export function fromSendCommand(fn: SendCommandFn): Adapter {
  const self: Adapter = {
    cluster: false,
    send: (args) => wrap(fn(...strings(args)) as Promise<Reply>),
    transaction: () => Promise.reject(new Error("redis-cell: a sendCommand function runs no transactions: pass a client")),
    masters: async () => [self],
  };
  return self;
}

/** rate-limit-redis's `sendCommandCluster`. */
export function fromSendCommandCluster(fn: SendCommandClusterFn): Adapter {
  const self: Adapter = {
    cluster: true,
    send: (args, key, readonly) =>
      wrap(fn({ ...(key === undefined ? {} : { key }), isReadOnly: readonly ?? false, command: strings(args) }) as Promise<Reply>),
    transaction: () => Promise.reject(new Error("redis-cell: a sendCommand function runs no transactions: pass a client")),
    masters: async () => {
      throw new Error("redis-cell: sendCommandCluster cannot reach every master: load the functions with a cluster client");
    },
  };
  return self;
}

/** Any supported client: ioredis (Redis, Cluster), node-redis v4/v5 (client, cluster), or an Adapter. */
export type Client = Adapter | object;

export function isAdapter(c: unknown): c is Adapter {
  return typeof c === "object" && c !== null && "send" in c && "transaction" in c && "masters" in c;
}

/** Wraps a client in an Adapter, recognising it by the methods it has. */
export function adapt(client: Client): Adapter {
  if (isAdapter(client)) return client;
  const c = client as Record<string, unknown>;
  if (typeof c.call === "function" && typeof c.multi === "function") return fromIoRedis(client as IoRedisLike);
  if (typeof c.sendCommand === "function") {
    if (Array.isArray(c.masters) && typeof c.nodeClient === "function") {
      return fromNodeRedisCluster(client as NodeRedisClusterLike);
    }
    return fromNodeRedis(client as NodeRedisLike);
  }
  throw new TypeError("redis-cell: unsupported client: pass an ioredis or node-redis (v4, v5) client or cluster");
}
