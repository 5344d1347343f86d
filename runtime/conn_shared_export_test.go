package runtime

// WriteTimerHeld reports whether c holds a write timer (armed or not). On
// the loop's thread.
func WriteTimerHeld(c *Conn) bool { return c.writeTimer != nil }
