/* tandemd: placeholder main until the daemon lands. */
int main(void)
{
	return 0;
}
