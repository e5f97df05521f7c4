// SPDX-License-Identifier: Apache-2.0

import * as fs from 'node:fs';
import * as path from 'node:path';

/** The conformance directory: CONFORMANCE_DIR, else ../conformance beside hooks-node. */
export function conformanceDir(): string {
  return process.env.CONFORMANCE_DIR ?? path.resolve(__dirname, '..', '..', '..', 'conformance');
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function load(name: string): any {
  return JSON.parse(fs.readFileSync(path.join(conformanceDir(), name), 'utf8'));
}
