// SPDX-License-Identifier: MIT
// Stack labels for C++ (tests/report): blocks that come through operator
// new, operator new[] and std::allocator; the label names the function
// that asked. Prints nothing.
//
//   leaked: 40 bytes by make_node (new), 400 by make_buffer (new[]),
//   24 + 256 by fill_vector (a std::vector<int> and its 64 ints)
#include <vector>

struct node {
	long a[5];
};

node *kept_node;
int *kept_buffer;
std::vector<int> *kept_vector;

__attribute__((noinline)) void make_node()
{
	kept_node = new node();
}

__attribute__((noinline)) void make_buffer()
{
	kept_buffer = new int[100];
}

__attribute__((noinline)) void fill_vector()
{
	kept_vector = new std::vector<int>;
	kept_vector->resize(64);
}

int main()
{
	make_node();
	make_buffer();
	fill_vector();
	return 0;
}
