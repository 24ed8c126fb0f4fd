package wasmcheck

// wazero's decoder allocates for every count it reads before it reads the entries counted, and a count can
// claim 2^32 entries in five bytes: a module of a few bytes took the process down with "fatal error: runtime:
// out of memory", which no recover catches. So Check reads every count wazero allocates for (the entries of
// every vector section, a type's parameters and results, an element segment's entries, a data segment's bytes,
// the name section's maps) and refuses any larger than the bytes left to hold its entries, one byte at least
// each. TestLyingCountsAreRefused replays the attack for each.

// count reads a vector's length, which cannot exceed the bytes left.
func (r *reader) count() uint32 {
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(r.b)-r.pos) {
		r.fail("%d entries declared in %d bytes", n, len(r.b)-r.pos)
		return 0
	}
	return n
}

// types reads the type section.
func (c *checker) types(r *reader) {
	n := r.count()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if form := r.byte(); r.err == nil && form != 0x60 {
			r.fail("type %d has form %#x", i, form)
		}
		for range 2 { // parameters, results
			for k := r.count(); k > 0 && r.err == nil; k-- {
				r.valType()
			}
		}
	}
}

// elements reads the element section.
func (c *checker) elements(r *reader) {
	for n := r.count(); n > 0 && r.err == nil; n-- {
		flags := r.u32()
		if flags > 7 {
			r.fail("element segment with flags %d", flags)
			return
		}
		if flags&3 == 2 {
			r.u32() // table index
		}
		if flags&1 == 0 {
			r.constExpr() // offset
		}
		if flags&3 != 0 {
			r.byte() // element kind or reference type
		}
		k := r.count()
		c.elementEntries += uint64(k)
		for ; k > 0 && r.err == nil; k-- {
			if flags&4 == 0 {
				r.u32() // function index
			} else {
				r.constExpr()
			}
		}
	}
}

// data reads the data section.
func (c *checker) data(r *reader) {
	c.dataSegments = r.count()
	for n := c.dataSegments; n > 0 && r.err == nil; n-- {
		switch flags := r.u32(); flags {
		case 0:
			r.constExpr()
		case 1:
		case 2:
			r.u32() // memory index
			r.constExpr()
		default:
			r.fail("data segment with flags %d", flags)
			return
		}
		r.bytes(r.count())
	}
}

// custom reads the name section, the one custom section wazero decodes: module, function and local names.
func (c *checker) custom(r *reader) {
	if r.name() != "name" {
		r.pos = len(r.b)
		return
	}
	for !r.done() {
		id := r.byte()
		sub := &reader{b: r.bytes(r.u32())}
		switch id {
		case 1: // function names
			c.names += uint64(sub.nameMap())
		case 2: // local names
			for n := sub.count(); n > 0 && sub.err == nil; n-- {
				sub.u32()
				c.names += uint64(sub.nameMap())
			}
		}
		if sub.err != nil {
			r.fail("name section: %v", sub.err)
		}
	}
}

func (r *reader) nameMap() uint32 {
	n := r.count()
	for k := n; k > 0 && r.err == nil; k-- {
		r.u32()
		r.name()
	}
	return n
}

// table records a table's limits and refuses it when the entries of all the module's tables could exceed the
// functions a module may have. wazero allocates every table whole for each instance, outside the memory limit:
// a 17-byte module with 2^27 entries took 1 GiB of heap per instance, and 2,000 tables of 100,000 entries in
// 10 KB took 1.5 GiB.
func (c *checker) table(t tableLimits, r *reader) {
	if r.err != nil {
		return
	}
	c.tables = append(c.tables, t)
	c.tableEntries += uint64(t.min)
	c.checkTableEntries(r)
}

// tableGrow accounts for a table.grow on table x: the table may then reach its maximum, which it must declare.
// wazero grows a table by whatever the guest asks up to 2^32 entries, and a module growing one by 2^31 ended
// the process with "fatal error: out of memory".
func (c *checker) tableGrow(x uint32, r *reader) {
	if x >= uint32(len(c.tables)) {
		r.fail("table.grow on table %d of %d", x, len(c.tables))
		return
	}
	t := &c.tables[x]
	if t.grown {
		return
	}
	if !t.hasMax {
		r.fail("table.grow on table %d, which declares no maximum", x)
		return
	}
	t.grown = true
	c.tableEntries += uint64(t.max) - uint64(min(t.min, t.max))
	c.checkTableEntries(r)
}

func (c *checker) checkTableEntries(r *reader) {
	if c.tableEntries > uint64(c.limits.Functions) {
		r.fail("tables of %d entries in all exceed the limit of %d (functions)", c.tableEntries, c.limits.Functions)
	}
}

// constExpr reads a constant expression, up to its end.
func (r *reader) constExpr() {
	for r.err == nil {
		op := r.byte()
		if op == 0x0b || r.err != nil {
			return
		}
		if err := skipImmediates(r, op); err != nil {
			r.fail("%v", err)
		}
	}
}
