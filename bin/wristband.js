#!/usr/bin/env node
// Entry point of the `wristband` command; the compiled program lives in dist/ (built by `npm install`).
// The Node version is checked before anything else is loaded: on Node 20 and older, the SQLite driver
// (a native module built for Node >= 22) crashes the process with a segmentation fault and no word.
// Exit status 20 is the `node` entry of EXIT_STATUS (src/platform/startup.ts, docs/operations.md).
const major = Number(process.versions.node.split('.')[0])
if (major < 22) {
  console.error(
    `wristband: Node ${process.versions.node} is not supported: Node 22, 24 or 26 is needed (${process.execPath}; see docs/operations.md, "Running in production")`,
  )
  process.exit(20)
}
await import('../dist/src/cli.js')
