package idemamqp

// ClosePublishing closes the channel answers are published on, as a
// channel error from the broker would, leaving the connection open.
func (c *Consumer) ClosePublishing() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pub.Close()
}
