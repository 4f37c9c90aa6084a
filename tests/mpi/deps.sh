#!/usr/bin/env bash
# The host packages 'make middleware' needs beyond scripts/deps.sh: Debian's
# Open MPI (4.1: mpirun, mpicc.openmpi, its pml ucx and mtl ofi) and MPICH
# (4.0, ch4:ucx: mpiexec.hydra, mpicc.mpich), kept apart so that 'make
# check' never pulls them; util-linux for unshare (the rsh agent's hostname),
# bc for the timings. Through scripts/deps.sh: as root it runs apt-get for
# the missing ones, otherwise it prints the command and stops.
set -eu

exec "$(dirname "$0")/../../scripts/deps.sh" openmpi-bin libopenmpi-dev \
	mpich libmpich-dev util-linux bc
