// SPDX-License-Identifier: Apache-2.0

export const SOURCE_DIR = 'src';
export const DIST_DIR = 'dist';
