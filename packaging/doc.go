// Package packaging holds the tests of what installs Sluice on a host: the
// .deb and .rpm built by scripts/package.sh from nfpm.yaml, their maintainer
// scripts (deb/, rpm/), the configuration file they ship
// (server.properties), the systemd unit (../systemd) and ../install.sh.
// It has no code of its own.
package packaging
