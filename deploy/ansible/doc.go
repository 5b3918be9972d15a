// Package ansible holds the Ansible collection dbhost.fleet
// (ansible_collections/dbhost/fleet/: the serve role, the collect, serve and
// roll-out playbooks, the dbhost_fix and dbhost_health modules). It has no Go
// code: its tests lint the collection and run its playbooks with the
// distribution's ansible-core against test hosts made on this machine
// (internal/testhost).
package ansible
