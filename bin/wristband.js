#!/usr/bin/env node
// Entry point of the `wristband` command; the compiled program lives in dist/ (built by `npm install`).
import '../dist/src/cli.js'
