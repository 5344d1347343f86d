package ws

// Mask exposes mask to the tests.
func Mask(key [4]byte, phase int, b []byte) int { return mask(key, phase, b) }

// DeflatedFrame exposes the shared compressed frame to the tests.
func (pm *Prepared) DeflatedFrame() []byte { return pm.deflated }
