// Real HTTP on loopback: an app listening on a free port, and concurrent requests.
import { once } from "node:events";

export async function listen(server) {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${server.address().port}`;
}

/** Sends `n` requests at once, spread over the urls; answers the responses (status, headers). */
export async function burst(urls, n, path = "/") {
  const res = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const r = await fetch(urls[i % urls.length] + path);
      await r.arrayBuffer();
      return { status: r.status, headers: r.headers };
    }),
  );
  return res;
}

export const count = (res, status) => res.filter((r) => r.status === status).length;
