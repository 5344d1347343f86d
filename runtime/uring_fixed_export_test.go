package runtime

// FixedTable returns cfg with each io_uring loop's fixed file table
// (UringDirectDescriptors) of slots entries, and, with margin >= -1, that
// margin for its multishot accept instead of the backlog (-1: none, so
// that a burst can find the table full).
func FixedTable(cfg Config, slots, margin int) Config {
	cfg.fixedSlots = slots
	if margin >= -1 {
		cfg.fixedMargin = &margin
	}
	return cfg
}

// OnSlot reports whether c lives in its loop's fixed file table, and
// HasDescriptor whether it has a descriptor too. On c's loop.
func OnSlot(c *Conn) bool        { return c.ur.fixed != 0 }
func HasDescriptor(c *Conn) bool { return c.fd >= 0 }
