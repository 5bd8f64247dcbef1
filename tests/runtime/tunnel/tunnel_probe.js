// tunnel_probe.js PORT - run inside a sandbox by test_egress_tunnel_docker.c: opens
// CONNECT tunnels to allowed.test:PORT through the egress relay (127.0.0.1:3128) and
// sends first bytes of its own; prints, per case, the first line the tunnel answered
// ("" when the proxy closed it without a byte).
const net = require("net");
const port = process.argv[2];

function tunnel(first) {
  return new Promise((resolve) => {
    const s = net.connect(3128, "127.0.0.1");
    let buf = "";
    let open = false;
    s.setEncoding("latin1");
    s.on("data", (d) => {
      buf += d;
      const end = buf.indexOf("\r\n\r\n");
      if (!open && end >= 0) {
        if (!buf.startsWith("HTTP/1.1 200 ")) {
          s.destroy();
          resolve("CONNECT refused: " + buf.split("\r\n")[0]);
          return;
        }
        open = true;
        buf = buf.slice(end + 4);
        s.write(first);
      }
    });
    s.on("error", () => {});
    s.on("close", () => resolve(buf.split("\r\n")[0]));
    s.write(`CONNECT allowed.test:${port} HTTP/1.1\r\n\r\n`);
  });
}

(async () => {
  const cases = [
    ["empty-line", `\r\nGET / HTTP/1.1\r\nHost: denied.test:${port}\r\n\r\n`],
    ["unknown-method", `FOO / HTTP/1.1\r\nHost: denied.test:${port}\r\n\r\n`],
    ["allowed", `GET / HTTP/1.1\r\nHost: allowed.test:${port}\r\n\r\n`],
  ];
  for (const [name, first] of cases) {
    console.log(`${name}: ${JSON.stringify(await tunnel(first))}`);
  }
})();
