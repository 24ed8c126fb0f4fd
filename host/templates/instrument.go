package templates

import (
	"fmt"
	"text/template"
	"text/template/parse"
)

// Instrumentation rewrites parsed templates (text/template/parse nodes are mutable) so that the budget sees
// everything that can repeat, whatever functions the template uses and whether or not it prints:
//
//   - every range body starts by calling osmRangeStep: one step per iteration, over lists, maps and integers;
//   - every template starts with osmTemplateEnter and ends with osmTemplateLeave: one step per invocation, and
//     the depth of nested invocations ({{ template }} and {{ block }} recursion, exponential define chains);
//   - every action that prints ends its pipeline with osmPrintCheck, which checks the value against the output
//     limits before fmt formats it.
//
// These functions are not in the set templates are parsed with, so a profile cannot call them itself.

// parse parses src into the set t, which is bound to the budget's functions, and instruments the templates it
// added.
func (b *budget) parse(t *template.Template, src string) (*template.Template, error) {
	if err := checkNesting(src, b.lim.Nesting); err != nil {
		return nil, fmt.Errorf("template: %s: %w", t.Name(), err)
	}
	t, err := t.Parse(src)
	if err != nil {
		return nil, err
	}
	for _, tt := range t.Templates() {
		tree := tt.Tree
		if tree == nil || tree.Root == nil || b.instrumented[tree] {
			continue
		}
		b.instrumented[tree] = true
		rewrite(tree.Root)
		root := tree.Root
		nodes := make([]parse.Node, 0, len(root.Nodes)+2)
		nodes = append(nodes, action(enterFunc, root.Pos))
		nodes = append(nodes, root.Nodes...)
		root.Nodes = append(nodes, action(leaveFunc, root.Pos))
	}
	return t, nil
}

// rewrite inserts the budget's calls into a parsed template; checkNesting has bounded its depth.
func rewrite(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				rewrite(c)
			}
		}
	case *parse.ActionNode:
		if len(n.Pipe.Decl) == 0 {
			n.Pipe.Cmds = append(n.Pipe.Cmds, command(printFunc, n.Pos))
		}
	case *parse.IfNode:
		rewrite(n.List)
		rewrite(n.ElseList)
	case *parse.WithNode:
		rewrite(n.List)
		rewrite(n.ElseList)
	case *parse.RangeNode:
		rewrite(n.List)
		rewrite(n.ElseList)
		n.List.Nodes = append([]parse.Node{action(stepFunc, n.Pos)}, n.List.Nodes...)
	}
}

func command(name string, pos parse.Pos) *parse.CommandNode {
	return &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{parse.NewIdentifier(name).SetPos(pos)}}
}

func action(name string, pos parse.Pos) *parse.ActionNode {
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos,
		Pipe: &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{command(name, pos)}}}
}
