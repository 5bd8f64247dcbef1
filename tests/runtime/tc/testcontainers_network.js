// testcontainers_network.js - inside a sandbox with a Docker sidecar: a
// user-defined network as Testcontainers users make one (Network.newNetwork()
// in Java, new Network() here), a container on it with a network alias and an
// exposed port (the listening-ports wait strategy), and a sibling container on
// the same network that reaches it by the alias through the inner daemon's
// embedded DNS (docs/testcontainers.md). Prints
// "TESTCONTAINERS NETWORK OK alias=web sibling=... sandbox=..." and exits 0, or
// prints the error and exits 1.
//
//   TC_IMAGE=sbx-tc-web:test node testcontainers_network.js
//
// The image serves /www with busybox httpd on 8080 and has sleep and nc.
// Needs DOCKER_HOST and TESTCONTAINERS_HOST_OVERRIDE (the sandbox sets both)
// and the image already loaded in the sidecar: nothing is pulled, Ryuk is off.
"use strict";

const http = require("http");

process.env.TESTCONTAINERS_RYUK_DISABLED = "true";

function get(host, port) {
    return new Promise((resolve, reject) => {
        const req = http.get({ host, port, path: "/", timeout: 5000 }, (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (d) => { body += d; });
            res.on("end", () => resolve({ status: res.statusCode, body }));
        });
        req.on("timeout", () => req.destroy(new Error("timeout")));
        req.on("error", reject);
    });
}

async function main() {
    const image = process.env.TC_IMAGE || "sbx-tc-web:test";
    if (!process.env.DOCKER_HOST) {
        throw new Error("DOCKER_HOST is not set: does this sandbox have a Docker sidecar?");
    }
    const { GenericContainer, Network, Wait } = require("testcontainers");
    const network = await new Network().start();
    const web = await new GenericContainer(image)
        .withNetwork(network)
        .withNetworkAliases("web")
        .withExposedPorts(8080)
        .withWaitStrategy(Wait.forListeningPorts())
        .withStartupTimeout(30000)
        .start();
    const sibling = await new GenericContainer(image)
        .withNetwork(network)
        .withCommand(["sleep", "120"])
        .start();
    const r = await sibling.exec(["sh", "-c",
        "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 web 8080 | tail -1"]);
    const g = await get(web.getHost(), web.getMappedPort(8080));
    await sibling.stop();
    await web.stop();
    await network.stop();
    if (r.exitCode !== 0 || !r.output.includes("tc-web-ok")) {
        throw new Error("the sibling's GET http://web:8080/ gave exit " + r.exitCode + ": " +
                        r.output);
    }
    if (g.status !== 200) {
        throw new Error("GET from the sandbox gave HTTP " + g.status);
    }
    console.log("TESTCONTAINERS NETWORK OK alias=web sibling=" + r.output.trim() +
                " sandbox=" + g.body.trim() + " network=" + network.getName());
}

main().catch((e) => {
    console.error("TESTCONTAINERS FAILED: " + (e && e.stack ? e.stack : e));
    process.exit(1);
});
