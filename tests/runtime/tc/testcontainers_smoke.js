// testcontainers_smoke.js - inside a sandbox with a Docker sidecar: starts
// and stops one container through the `testcontainers` npm package
// (docs/testcontainers.md). Prints "TESTCONTAINERS OK ..." and exits 0, or
// prints the error and exits 1.
//
//   TC_IMAGE=sbx-busybox:test node testcontainers_smoke.js
//
// Needs DOCKER_HOST (the sidecar's socket; the sandbox sets it) and the
// image already loaded in the sidecar: nothing is pulled, Ryuk is off.
"use strict";

process.env.TESTCONTAINERS_RYUK_DISABLED = "true";

async function main() {
    const image = process.env.TC_IMAGE || "sbx-busybox:test";
    if (!process.env.DOCKER_HOST) {
        throw new Error("DOCKER_HOST is not set: does this sandbox have a Docker sidecar?");
    }
    const { GenericContainer } = require("testcontainers");
    const container = await new GenericContainer(image)
        .withCommand(["sleep", "300"])
        .withNetworkMode("none")
        .start();
    const id = container.getId();
    const r = await container.exec(["sh", "-c", "echo inner-$(cat /proc/self/uid_map | tr -s ' ' | cut -d' ' -f3)"]);
    if (r.exitCode !== 0) {
        throw new Error("exec in the container failed: " + r.output);
    }
    await container.stop();
    console.log("TESTCONTAINERS OK container=" + id.slice(0, 12) + " image=" + image +
                " exec=" + r.output.trim() + " node=" + process.version);
}

main().catch((e) => {
    console.error("TESTCONTAINERS FAILED: " + (e && e.stack ? e.stack : e));
    process.exit(1);
});
