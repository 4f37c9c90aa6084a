// SPDX-License-Identifier: MIT
/* Placeholder (being written). */
