// testcontainers_ports.js - inside a sandbox with a Docker sidecar: a
// Testcontainers container with an exposed port and the listening-ports wait
// strategy, as every database module starts one (docs/testcontainers.md).
// The image serves /www with busybox httpd on 8080; the script fetches
// http://<host>:<mapped port>/ from the sandbox and prints
// "TESTCONTAINERS PORTS OK host=... port=... body=..." and exits 0, or prints
// the error and exits 1.
//
//   TC_IMAGE=sbx-tc-web:test node testcontainers_ports.js
//
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
    const { GenericContainer, Wait } = require("testcontainers");
    const container = await new GenericContainer(image)
        .withExposedPorts(8080)
        .withWaitStrategy(Wait.forListeningPorts())
        .withStartupTimeout(30000)
        .start();
    const host = container.getHost();
    const port = container.getMappedPort(8080);
    const r = await get(host, port);
    await container.stop();
    if (r.status !== 200) {
        throw new Error("GET http://" + host + ":" + port + "/ gave HTTP " + r.status);
    }
    console.log("TESTCONTAINERS PORTS OK host=" + host + " port=" + port + " body=" +
                r.body.trim());
}

main().catch((e) => {
    console.error("TESTCONTAINERS FAILED: " + (e && e.stack ? e.stack : e));
    process.exit(1);
});
