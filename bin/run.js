#!/usr/bin/env node
// Entry point of the ichor CLI: oclif reads the generated manifest, so --help needs no command imports.
import {execute} from '@oclif/core'

await execute({dir: import.meta.url})
