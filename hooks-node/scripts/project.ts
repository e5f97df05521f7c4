// SPDX-License-Identifier: Apache-2.0

// What test-artifact.ts and test-preload.ts share: a service project in the
// system's temp directory that installs the packed tarball as a user would.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** hooks-node/, the package's root. */
export const root = path.resolve(__dirname, '..', '..');
export const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** Runs cmd in cwd and returns its stdout (stderr goes to the test's). */
export function run(cmd: string, args: string[], cwd: string): string {
  return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/**
 * Makes dir/service, a private project named name, installs packages there
 * (the tarball's path among them) from npm's cache where it can, and copies
 * files from scripts/<from>/ into it. Returns its path.
 */
export function installProject(dir: string, name: string, packages: string[], from: string, files: string[]): string {
  const project = path.join(dir, 'service');
  fs.mkdirSync(project);
  fs.writeFileSync(
    path.join(project, 'package.json'),
    JSON.stringify({ name, version: '0.0.0', private: true }) + '\n'
  );
  run(npm, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', ...packages], project);
  for (const f of files) fs.copyFileSync(path.join(root, 'scripts', from, f), path.join(project, f));
  return project;
}
