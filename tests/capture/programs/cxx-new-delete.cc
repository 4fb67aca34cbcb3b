// SPDX-License-Identifier: MIT
// C++ new/delete, new[]/delete[] and a std::vector, through the same hooks
// (libstdc++'s operator new calls malloc). Live at exit from the program:
// an int[25] (100 bytes), a Node (48 bytes), a std::vector<int> object (24
// bytes) and its buffer of 64 ints (256 bytes): 428 bytes in 4 blocks. On
// top of that, libstdc++'s emergency exception pool, allocated when it
// starts, which valgrind and memtrace both see.
#include <vector>

struct Node {
	long a[6];
};

int *kept_array;
Node *kept_node;
std::vector<int> *kept_vector;

int main()
{
	delete new Node();
	delete[] new int[1000];
	std::vector<int> grown;
	for (int i = 0; i < 1000; i++)
		grown.push_back(i); // reallocates through operator new and delete
	kept_array = new int[25];
	kept_node = new Node();
	kept_vector = new std::vector<int>(64);
	return 0;
}
