// SPDX-License-Identifier: MIT
/* Placeholder: WQE execution (being written). */
