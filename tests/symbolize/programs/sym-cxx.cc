// SPDX-License-Identifier: MIT
// Built -O0 -g: a method of a class template in a namespace and a
// std::vector's push_back of an lvalue, for demangled names. The sizes (5600
// and 333 bytes) are what check-symbols finds the allocations by.
#include <vector>

namespace ns {
template <typename T> struct Holder {
	T *make(int n)
	{
		return new T[n]; /* line:x_new */
	}
};
} // namespace ns

struct Big {
	char b[333];
};

long *kept_array;
std::vector<Big> *kept_vector;

int main()
{
	ns::Holder<long> h;
	kept_array = h.make(700); /* line:x_make */
	kept_vector = new std::vector<Big>;
	Big b{};
	kept_vector->push_back(b); /* line:x_push */
	return 0;
}
