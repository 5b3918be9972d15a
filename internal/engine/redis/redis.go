// Package redis finds running Redis (and Valkey) servers and reads redis.conf
// with its includes and the command line that overrides it.
package redis
